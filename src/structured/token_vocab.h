// TokenVocab: the bytes each token of a model's vocabulary stands for, and a byte trie over them in preorder,
// which the matcher walks against its automaton to find the allowed tokens.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace parallm {
class Tokenizer;
}

namespace parallm::structured {

class TokenVocab {
 public:
  // One trie node: the byte on the edge into it, its depth (bytes from the root, >= 1) and the index just past
  // its subtree (to skip it when the byte is not allowed). 8 bytes, so that a walk over the 151K-token trie of
  // Qwen (~400K nodes) reads little memory; the tokens of a node are in first_token().
  struct TrieNode {
    uint8_t byte;
    uint16_t depth;
    int32_t skip;
  };
  // Per node, then one past the last: the index in token_ids() (which is in preorder) of the first token at or
  // below it. The tokens ending at node i are [first_token[i], first_token[i + 1]); those of its whole subtree
  // are [first_token[i], first_token[skip]).
  const std::vector<int32_t>& first_token() const { return first_token_; }
  // The bytes on the edges below node i (not its own byte): 256 bits.
  using ByteBits = std::array<uint64_t, 4>;
  const ByteBits& bytes_below(int32_t node) const { return below_[static_cast<size_t>(node)]; }

  // Each id below `vocab_size` (the model's logits width, >= the tokenizer's size): its decoded bytes (byte-level
  // BPE: GPT-2's byte alphabet undone; SentencePiece: U+2581 -> space and <0xNN> -> the byte). Special and
  // control tokens, unused fillers and ids past the tokenizer are never allowed by a grammar.
  static std::shared_ptr<const TokenVocab> FromTokenizer(const Tokenizer& tokenizer, int32_t vocab_size);
  // Explicit bytes per id; nullopt (or empty) marks a token no grammar allows (tests).
  static std::shared_ptr<const TokenVocab> FromBytes(const std::vector<std::optional<std::string>>& tokens);

  int32_t size() const { return size_; }
  int32_t mask_words() const { return (size_ + 31) / 32; }
  // The token's bytes; empty for a token no grammar allows.
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  int32_t max_depth() const { return max_depth_; }

 private:
  void BuildTrie();

  int32_t size_ = 0;
  std::vector<std::string> bytes_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> first_token_;
  std::vector<ByteBits> below_;
  std::vector<int32_t> token_ids_;
  int32_t max_depth_ = 0;
};

}  // namespace parallm::structured
