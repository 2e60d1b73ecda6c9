// TokenTrie: a byte trie over a set of tokens in preorder, which the matcher walks against its automaton to find
// the allowed tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace parallm::structured {

class TokenTrie {
 public:
  // One node: the byte on the edge into it, its depth (bytes from the root, >= 1) and the index just past its
  // subtree (to skip it when the byte is not allowed). 8 bytes, so that a walk over the 151K-token trie of Qwen
  // (~400K nodes) reads little memory; the tokens of a node are in first_token().
  struct Node {
    uint8_t byte;
    uint16_t depth;
    int32_t skip;
  };
  using ByteBits = std::array<uint64_t, 4>;

  // Over the tokens `ids` (each with non-empty bytes[id]), for masks of `mask_words` 32-bit words.
  static TokenTrie Build(const std::vector<std::string>& bytes, std::vector<int32_t> ids, int32_t mask_words);

  const std::vector<Node>& nodes() const { return nodes_; }
  // Per node, then one past the last: the index in token_ids() (which is in preorder) of the first token at or
  // below it. The tokens ending at node i are [first_token[i], first_token[i + 1]); those of its whole subtree
  // are [first_token[i], first_token[skip]).
  const std::vector<int32_t>& first_token() const { return first_token_; }
  // The bytes on the edges below node i (not its own byte): 256 bits.
  const ByteBits& bytes_below(int32_t node) const { return below_[static_cast<size_t>(node)]; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  // Bit t (of word t / 32) set for every token in the trie.
  const std::vector<uint32_t>& tokens() const { return tokens_; }
  int32_t max_depth() const { return max_depth_; }

 private:
  std::vector<Node> nodes_;
  std::vector<int32_t> first_token_;
  std::vector<ByteBits> below_;
  std::vector<int32_t> token_ids_;
  std::vector<uint32_t> tokens_;
  int32_t max_depth_ = 0;
};

}  // namespace parallm::structured
