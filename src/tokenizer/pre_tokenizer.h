// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): split normalized text into words the model encodes one
// by one. Split (regex/string, with the five split behaviours and invert), ByteLevel, Metaspace, Digits,
// Whitespace, WhitespaceSplit, Sequence.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "tokenizer/regex.h"
#include "util/status.h"

namespace parallm {

// How a Split pre-tokenizer treats the pieces its pattern matches (Rust tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Splits `text` at the matches of `pattern` (or, inverted, at what lies between them). Empty pieces are dropped.
std::vector<std::string> SplitText(const std::string& text, const Regex& pattern, SplitBehavior behavior,
                                   bool invert);

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces every word in `words` by its pieces. `section_index` is the index of the text section (between
  // added tokens) these words come from; Metaspace's prepend_scheme "first" uses it.
  virtual void PreTokenize(std::vector<std::string>& words, size_t section_index) const = 0;

  // Null JSON gives a null pointer (the whole section is one word).
  static Result<std::unique_ptr<PreTokenizer>> FromJson(const boost::json::value& json);
  // llama.cpp's GGUF pre-tokenizers: the regexes named by tokenizer.ggml.pre, applied in order as Isolated
  // splits, then the byte-level mapping. Errors for names parallm does not know.
  static Result<std::unique_ptr<PreTokenizer>> ForGgufPre(const std::string& pre);
  // The byte-level mapping alone (GPT-2 style, no regex split, no prefix space).
  static std::unique_ptr<PreTokenizer> ByteLevelOnly();
};

}  // namespace parallm
