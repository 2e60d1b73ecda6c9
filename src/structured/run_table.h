// RunTable: the tokens of a vocabulary that are runs of one character class (the ordinary characters of a JSON
// string, say), grouped by how many characters they hold. A grammar state that takes any k characters of the
// class and then none (a counted string with k left) allows exactly the class tokens of at most k characters; one
// that loops on the class allows all of them. Its mask is then that precomputed set plus a walk of the trie that
// skips every subtree made only of class tokens: a copy and a short walk instead of a walk of the vocabulary.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "structured/token_trie.h"

namespace parallm::structured {

// A character class: the ASCII bytes in `ascii`, and every valid UTF-8 encoded non-ASCII character when utf8.
struct RunClass {
  std::array<uint64_t, 2> ascii{};
  bool utf8 = false;
  bool operator==(const RunClass&) const = default;
};

struct RunTable {
  // Longest run counted; longer class tokens are in `all` only.
  static constexpr int32_t kMaxChars = 64;
  RunClass cls;
  // at_most[c] (c in 0..kMaxChars): bitmask of the class tokens of at most c characters (an unfinished last
  // character counts as one).
  std::vector<std::vector<uint32_t>> at_most;
  std::vector<uint32_t> all;  // every class token
  // By position in the trie's token_ids(): bit set for a class token; and how many tokens before each position
  // (one past the last too) are not class tokens, so that a subtree [first_token[i], first_token[skip]) is made
  // only of class tokens when both ends have the same count.
  std::vector<uint64_t> class_at;
  std::vector<int32_t> others_before;

  // Over the tokens of `trie`, whose bytes are `bytes[id]`.
  static RunTable Build(const RunClass& cls, const std::vector<std::string>& bytes, const TokenTrie& trie);
};

// Decoder states of UTF-8 as a small automaton over bytes: 0 at a character boundary; 1-3 continuation bytes
// due; 4-7 after the lead bytes whose second byte has a narrower range (E0, ED: no surrogates, F0, F4). Returns
// -1 on a byte that cannot come next.
int Utf8Step(int state, uint8_t b);

}  // namespace parallm::structured
