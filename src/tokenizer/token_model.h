// TokenModel: the last encoding stage, pre-tokenized words -> ids (BPE with merges, or SentencePiece scores).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace parallm {

class TokenModel {
 public:
  virtual ~TokenModel() = default;
  // Appends the ids of `words` (one pre-tokenized section) to `ids`. Thread-safe.
  virtual void Encode(const std::vector<std::string>& words, std::vector<int32_t>& ids) const = 0;
};

}  // namespace parallm
