// UTF-8 helpers for the tokenizer: lossy validation, code point iteration, Unicode normalization and case
// mapping (utf8proc), and the whitespace sets the reference tokenizers use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace parallm::unicode {

// Length in bytes of the UTF-8 sequence that starts with `lead` in valid UTF-8 (1 for a stray byte).
inline size_t SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

// Decodes the code point at `s[pos]` of valid UTF-8 and advances `pos` past it.
char32_t DecodeAt(std::string_view s, size_t& pos);
void AppendUtf8(std::string& out, char32_t cp);

bool IsValidUtf8(std::string_view s);
// Replaces every maximal invalid subsequence by U+FFFD, exactly as the WHATWG UTF-8 decoder (JavaScript's
// TextDecoder) and Rust's String::from_utf8_lossy do. Valid input is returned unchanged.
std::string ToValidUtf8(std::string_view s);

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
// `s` must be valid UTF-8.
std::string Normalize(std::string_view s, NormalForm form);
// Full lowercase mapping as JavaScript's String.prototype.toLowerCase (final sigma, U+0130 -> "i\u0307").
std::string ToLower(std::string_view s);

// Unicode White_Space (what Oniguruma's and tokenizers.js's rewritten \s match).
bool IsWhiteSpace(char32_t cp);
// JavaScript's \s and String.prototype.trim set: White_Space without U+0085, plus U+FEFF.
bool IsJsWhiteSpace(char32_t cp);
std::string_view TrimStartJs(std::string_view s);
std::string_view TrimEndJs(std::string_view s);

// Number of code points in valid UTF-8.
size_t CodePointCount(std::string_view s);

}  // namespace parallm::unicode
