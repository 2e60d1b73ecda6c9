// Added tokens (tokenizer.json "added_tokens", GGUF control/user-defined tokens) and the leftmost-longest
// matcher that cuts their text out of the input before the model sees it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace parallm {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;      // control token: matched only when parsing special tokens, skippable in Decode
  bool lstrip = false;       // swallows the whitespace before it
  bool rstrip = false;       // swallows the whitespace after it
  bool normalized = false;   // matched in the normalized text (its content normalized too), not the raw text
  bool single_word = false;  // matched only when not inside a word
};

// Finds added-token contents in text: at each position the longest pattern that starts there wins, and the
// scan resumes after it (leftmost-longest, like tokenizers.js's DictionarySplitter and Rust's aho-corasick).
class AddedTokenMatcher {
 public:
  void Add(std::string_view pattern, int32_t token_index);
  bool empty() const { return num_patterns_ == 0; }

  struct Piece {
    std::string_view text;
    int32_t token_index = -1;  // -1: plain text
  };
  // Pieces covering `text` in order; `tokens` supplies single_word flags. Plain pieces may be empty.
  std::vector<Piece> Split(std::string_view text, const std::vector<AddedToken>& tokens) const;

 private:
  struct Node {
    int32_t token_index = -1;
  };
  std::vector<Node> nodes_{1};
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> child
  size_t num_patterns_ = 0;
};

}  // namespace parallm
