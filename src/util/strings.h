// Small string helpers shared by the CLI and the loaders: splitting, parsing id lists, byte sizes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace parallm {

std::vector<std::string> Split(std::string_view text, char sep);
// "1,2, 3" -> {1, 2, 3}; rejects anything that is not a comma-separated list of non-negative integers.
Result<std::vector<int32_t>> ParseIdList(std::string_view text);
// 1536 -> "1.5 KiB"
std::string HumanBytes(double bytes);
// `text` with every invalid UTF-8 sequence replaced by U+FFFD (one per maximal invalid subpart, as the
// Unicode standard recommends), so it can go into JSON.
std::string ToValidUtf8(std::string_view text);
bool EndsWith(std::string_view s, std::string_view suffix);
bool StartsWith(std::string_view s, std::string_view prefix);

}  // namespace parallm
