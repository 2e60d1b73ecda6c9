// CharClass: a set of Unicode code points as sorted ranges, and its translation into grammar elements over
// UTF-8 bytes (one code point becomes one to four bytes; a class becomes alternatives of byte-range sequences).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "structured/grammar.h"

namespace parallm::structured {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct CharClass {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive [lo, hi]

  void Add(uint32_t lo, uint32_t hi) { ranges.emplace_back(lo, hi); }
  void Add(uint32_t c) { ranges.emplace_back(c, c); }
  // Sorts and merges overlapping or adjacent ranges.
  void Normalize();
  // Everything in [0, kMaxCodePoint] that is not in the class.
  CharClass Negated() const;
  // The class without the code points of `other`.
  CharClass Minus(const CharClass& other) const;
  bool Contains(uint32_t c) const;
  bool empty() const { return ranges.empty(); }
};

// Appends to `sequence` an element that matches exactly one UTF-8 encoded code point of `cls` (surrogates
// excluded): one byte set when the class is ASCII, else a helper rule of byte-range sequences.
void AppendCharClass(Grammar& grammar, const CharClass& cls, std::vector<GrammarElement>* sequence);

// Appends `c` as UTF-8 to `out`.
void AppendUtf8(uint32_t c, std::string* out);

}  // namespace parallm::structured
