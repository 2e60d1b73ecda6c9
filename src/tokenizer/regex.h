// Regex: PCRE2 (JIT, UTF + UCP) for pre-tokenizer Split patterns, with a translator from the Oniguruma
// dialect of tokenizer.json patterns to PCRE2 that follows tokenizers.js's reading of them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"

namespace parallm {

class Regex {
 public:
  // A PCRE2 pattern as is (UTF, UCP, multiline with LF newlines).
  static Result<Regex> Compile(const std::string& pcre2_pattern);
  // A tokenizer.json / Oniguruma pattern: \s and \S mean Unicode White_Space, \d is \p{Nd}, \h is a hex digit,
  // `.` excludes only \n, and (?i:...) folds ASCII letters only (as tokenizers.js does; PCRE2 alone would fold
  // e.g. U+017F LATIN SMALL LETTER LONG S to 's').
  static Result<Regex> FromOniguruma(std::string_view pattern);
  // Matches `text` literally.
  static Regex Literal(std::string_view text);

  // Non-overlapping matches [begin, end) left to right over valid UTF-8; empty matches are skipped and the
  // search resumes one code point later (JavaScript's matchAll with the `u` flag).
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const;
  // Every match replaced by `with`.
  std::string ReplaceAll(std::string_view text, std::string_view with) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::shared_ptr<const Code> code_;  // null for a literal
  std::string literal_;
  std::string pattern_;
};

// The translation FromOniguruma applies, exposed for tests.
Result<std::string> OnigurumaToPcre2(std::string_view pattern);

}  // namespace parallm
