// CharClass: code-point set algebra and the UTF-8 range splitting that turns a class into byte-level grammar.
#include "structured/char_class.h"

#include <algorithm>
#include <string>

namespace parallm::structured {

void CharClass::Normalize() {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  ranges = std::move(merged);
}

CharClass CharClass::Negated() const {
  CharClass c = *this;
  c.Normalize();
  CharClass out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : c.ranges) {
    if (lo > next) out.Add(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.Add(next, kMaxCodePoint);
  return out;
}

CharClass CharClass::Minus(const CharClass& other) const {
  // A \ B = not(not A or B).
  CharClass u = Negated();
  u.ranges.insert(u.ranges.end(), other.ranges.begin(), other.ranges.end());
  return u.Negated();
}

bool CharClass::Contains(uint32_t c) const {
  for (const auto& [lo, hi] : ranges)
    if (c >= lo && c <= hi) return true;
  return false;
}

void AppendUtf8(uint32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

namespace {

using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;

// Splits [lo, hi] (same encoded length, no surrogates) until each piece is a product of byte ranges, the
// classic construction of RE2 and Rust's regex-syntax.
void SplitSameLength(uint32_t lo, uint32_t hi, std::vector<ByteRanges>* out) {
  std::string a, b;
  AppendUtf8(lo, &a);
  AppendUtf8(hi, &b);
  const size_t len = a.size();
  for (size_t i = 1; i < len; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        SplitSameLength(lo, lo | m, out);
        SplitSameLength((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        SplitSameLength(lo, (hi & ~m) - 1, out);
        SplitSameLength(hi & ~m, hi, out);
        return;
      }
    }
  }
  ByteRanges seq;
  for (size_t i = 0; i < len; ++i) seq.emplace_back(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]));
  out->push_back(std::move(seq));
}

void SplitRange(uint32_t lo, uint32_t hi, std::vector<ByteRanges>* out) {
  static constexpr uint32_t kBounds[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  // Surrogates are not code points UTF-8 may encode.
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) SplitRange(lo, 0xD7FF, out);
    if (hi > 0xDFFF) SplitRange(0xE000, hi, out);
    return;
  }
  for (uint32_t bound : kBounds) {
    if (lo <= bound && hi > bound) {
      SplitRange(lo, bound, out);
      SplitRange(bound + 1, hi, out);
      return;
    }
  }
  SplitSameLength(lo, hi, out);
}

ByteSet Range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  for (int b = lo; b <= hi; ++b) s.set(static_cast<size_t>(b));
  return s;
}

}  // namespace

void AppendCharClass(Grammar& grammar, const CharClass& cls, std::vector<GrammarElement>* sequence) {
  CharClass c = cls;
  c.Normalize();
  ByteSet ascii;
  std::vector<ByteRanges> multi;
  for (const auto& [lo, hi] : c.ranges) {
    if (lo < 0x80) ascii |= Range(static_cast<uint8_t>(lo), static_cast<uint8_t>(std::min<uint32_t>(hi, 0x7F)));
    if (hi >= 0x80) SplitRange(std::max<uint32_t>(lo, 0x80), hi, &multi);
  }
  if (multi.empty() && ascii.any()) {
    sequence->push_back(grammar.Bytes(ascii));
    return;
  }
  const int32_t rule = grammar.NewHelperRule("char");
  if (ascii.any()) grammar.AddAlternative(rule, {grammar.Bytes(ascii)});
  for (const ByteRanges& seq : multi) {
    std::vector<GrammarElement> alt;
    for (const auto& [lo, hi] : seq) alt.push_back(grammar.Bytes(Range(lo, hi)));
    grammar.AddAlternative(rule, std::move(alt));
  }
  // An empty class matches nothing: a defined rule without alternatives.
  sequence->push_back(Grammar::RuleRef(rule));
}

}  // namespace parallm::structured
