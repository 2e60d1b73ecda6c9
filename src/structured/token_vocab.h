// TokenVocab: the bytes each token of a model's vocabulary stands for, the byte trie over them that the matcher
// walks against its automaton, and the vocabulary split by character classes (RunTable), shared by all grammars.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "structured/run_table.h"
#include "structured/token_trie.h"

namespace parallm {
class Tokenizer;
}

namespace parallm::structured {

class TokenVocab {
 public:
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
  // Every token a grammar may allow, as a byte trie.
  const TokenTrie& trie() const { return trie_; }
  // The vocabulary split by a character class (RunTable), built on first use and kept (thread-safe); null past
  // kMaxRunTables classes (each costs about 1.9 MB on a 151K vocabulary).
  const RunTable* Runs(const RunClass& cls) const;
  static constexpr size_t kMaxRunTables = 16;

 private:
  void BuildTrie();

  int32_t size_ = 0;
  std::vector<std::string> bytes_;
  TokenTrie trie_;
  mutable std::mutex runs_mu_;
  mutable std::vector<std::unique_ptr<const RunTable>> runs_;
};

}  // namespace parallm::structured
