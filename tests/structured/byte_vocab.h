// The vocabulary of the 256 single bytes, on which the grammar tests check what a grammar accepts byte by byte.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "structured/matcher.h"

namespace parallm::structured {

inline std::shared_ptr<const TokenVocab> ByteVocab() {
  static const auto vocab = [] {
    std::vector<std::optional<std::string>> tokens;
    for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
    return TokenVocab::FromBytes(tokens);
  }();
  return vocab;
}

// Whether the grammar accepts the whole of `text` and may end there; false for a grammar that did not compile.
inline bool Matches(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  if (g == nullptr) return false;
  GrammarMatcher m(g);
  return m.AcceptBytes(text) && m.CanEnd();
}

}  // namespace parallm::structured
