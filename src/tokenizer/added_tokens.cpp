// The byte trie behind AddedTokenMatcher, and single_word boundary checks.
#include "tokenizer/added_tokens.h"

#include <utf8proc.h>

#include "tokenizer/unicode.h"

namespace parallm {
namespace {

bool IsWordChar(char32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_NL:
      return true;
    default:
      return false;
  }
}

}  // namespace

void AddedTokenMatcher::Add(std::string_view pattern, int32_t token_index) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (char c : pattern) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
    auto it = edges_.find(key);
    if (it == edges_.end()) {
      nodes_.emplace_back();
      it = edges_.emplace(key, static_cast<int32_t>(nodes_.size() - 1)).first;
    }
    node = it->second;
  }
  if (nodes_[static_cast<size_t>(node)].token_index < 0) ++num_patterns_;
  nodes_[static_cast<size_t>(node)].token_index = token_index;
}

std::vector<AddedTokenMatcher::Piece> AddedTokenMatcher::Split(std::string_view text,
                                                               const std::vector<AddedToken>& tokens) const {
  std::vector<Piece> pieces;
  if (empty()) {
    pieces.push_back({text, -1});
    return pieces;
  }
  size_t start = 0;  // beginning of the pending plain text
  for (size_t i = 0; i < text.size();) {
    int32_t node = 0, found = -1;
    size_t found_end = 0;
    for (size_t j = i; j < text.size(); ++j) {
      auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[j]));
      if (it == edges_.end()) break;
      node = it->second;
      if (nodes_[static_cast<size_t>(node)].token_index >= 0) {
        found = nodes_[static_cast<size_t>(node)].token_index;
        found_end = j + 1;
      }
    }
    if (found >= 0 && tokens[static_cast<size_t>(found)].single_word) {
      bool inside = false;
      if (i > 0) {
        size_t b = i - 1;
        while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
        size_t p = b;
        inside = IsWordChar(unicode::DecodeAt(text, p));
      }
      if (found_end < text.size()) {
        size_t p = found_end;
        inside = inside || IsWordChar(unicode::DecodeAt(text, p));
      }
      if (inside) found = -1;
    }
    if (found < 0) {
      i += unicode::SequenceLength(static_cast<unsigned char>(text[i]));
      continue;
    }
    pieces.push_back({text.substr(start, i - start), -1});
    pieces.push_back({text.substr(i, found_end - i), found});
    i = start = found_end;
  }
  pieces.push_back({text.substr(start), -1});
  return pieces;
}

}  // namespace parallm
