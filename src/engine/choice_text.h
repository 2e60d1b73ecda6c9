// ChoiceText: one completion's text as its tokens arrive: incremental detokenization (UTF-8 held back until
// complete), then the request's stop strings (text cut before a match, held back while a match may be starting).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace parallm {

class ChoiceText {
 public:
  // `prompt` primes the detokenizer (a leading space depends on what came before); `stop` may be empty;
  // `skip_special`: special tokens are left out of the text (SamplingParams::skip_special_tokens).
  ChoiceText(const Tokenizer& tokenizer, std::span<const int32_t> prompt, const std::vector<std::string>& stop,
             bool skip_special = true);

  struct Step {
    std::string text;      // text that became final with these tokens
    bool stopped = false;  // a stop string matched: no text follows; the request should be stopped
  };
  // Adds the tokens a step produced; `finished` flushes whatever was held back. After a stop, returns nothing.
  Step Add(std::span<const int32_t> tokens, bool finished);
  bool stopped() const { return stops_ != nullptr && stops_->stopped(); }
  const std::string& text() const { return text_; }  // everything returned so far

 private:
  IncrementalDetokenizer detok_;
  std::unique_ptr<StopStringMatcher> stops_;
  std::string text_;
};

}  // namespace parallm
