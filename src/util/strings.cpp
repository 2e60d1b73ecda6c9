// Small string helpers: splitting, id lists, byte sizes.
#include "util/strings.h"

#include <charconv>

namespace parallm {

std::vector<std::string> Split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = text.find(sep, start);
    if (pos == std::string_view::npos) {
      out.emplace_back(text.substr(start));
      return out;
    }
    out.emplace_back(text.substr(start, pos - start));
    start = pos + 1;
  }
}

Result<std::vector<int32_t>> ParseIdList(std::string_view text) {
  std::vector<int32_t> ids;
  for (const std::string& part : Split(text, ',')) {
    std::string_view p = part;
    while (!p.empty() && p.front() == ' ') p.remove_prefix(1);
    while (!p.empty() && p.back() == ' ') p.remove_suffix(1);
    int32_t v = 0;
    auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
    if (p.empty() || ec != std::errc() || ptr != p.data() + p.size() || v < 0)
      return Err("'{}' is not a token id (expected a comma-separated list of non-negative integers)", part);
    ids.push_back(v);
  }
  return ids;
}

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} {}", bytes, units[u]) : fmt::format("{:.1f} {}", bytes, units[u]);
}

std::string ToValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c < 0x80) {
      len = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // no overlong forms
      if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    }
    size_t valid = len == 0 ? 0 : 1;  // bytes of this sequence that are well formed so far
    while (valid > 0 && valid < len && i + valid < n) {
      const unsigned char b = p[i + valid];
      if (valid == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) break;
      ++valid;
    }
    if (len > 0 && valid == len) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for the maximal invalid subpart
      i += valid > 0 ? valid : 1;
    }
  }
  return out;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace parallm
