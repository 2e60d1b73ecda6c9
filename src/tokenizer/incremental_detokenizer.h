// IncrementalDetokenizer: turns a stream of generated token ids into text chunks as they become final, so that
// the chunks concatenate to exactly Tokenizer::Decode of the whole stream.
//
// How (vLLM's / text-generation-inference's scheme, made exact): the detokenizer keeps a small window of ids,
// a few already-emitted "context" tokens followed by the tokens whose text is not yet out, and after each token
// decodes only that window. The context makes the decoder behave as it does mid-text (SentencePiece's leading
// "▁" is a space; Strip / Metaspace only drop the space at the very start of the stream; byte-fallback and
// byte-level runs keep joining across tokens). The new text is the window's text past what was emitted, minus a
// tail that may still change:
//   - trailing U+FFFD: an incomplete UTF-8 sequence (a byte token that splits a character) that the next
//     token may complete; held until it is complete or the stream ends (a real U+FFFD is released then too);
//   - with clean_up_tokenization_spaces (" ." -> ".", " 's" -> "'s", " ' " -> "'", ...): a trailing space or
//     quote followed only by pattern characters (at most 8 bytes), since the next token could remove a space
//     there or bring one back (" ' " -> "'" but " ' ." -> " '.").
// The window slides forward (keeping a few context tokens) only after checking that decoding the shorter window
// reproduces the not-yet-final text and the context just before it, so its start never leaks into new text.
//
// Invariant (tested exhaustively in tests/tokenizer/incremental_detokenizer_test.cpp): after every Add, the
// concatenation of everything returned is a prefix of Decode(ids so far, skip_special); after Flush it equals
// it. With prompt ids, the text is what Decode(prompt ++ ids) adds after Decode(prompt); the prompt's last
// tokens serve only as context. (Where the generated ids change the prompt's own text, e.g. complete a
// character its last byte token began, the text starts where the two decodes agree.)
//
// Cost: O(1) amortized per token: each Add decodes a bounded window (at most ~2 * kContextTokens tokens in
// ordinary text; it grows only while the text cannot be released, e.g. a long run of U+FFFD), never the whole
// sequence. Construction takes microseconds: it shares the tokenizer's tables (a Tokenizer copy is a
// shared_ptr copy) and decodes at most a few prompt tokens, whatever the prompt's length.
//
// Not thread-safe; one per request.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace parallm {

class IncrementalDetokenizer {
 public:
  // Context tokens kept at the start of the window after it slides; the window slides when it reaches twice
  // this many tokens.
  static constexpr size_t kContextTokens = 6;

  // `prompt`: the prompt's ids, read only here (its last few tokens become context); empty for a stream
  // decoded on its own, where Decode's start-of-text rules (dropping the leading space) apply.
  IncrementalDetokenizer(const Tokenizer& tokenizer, std::span<const int32_t> prompt, bool skip_special);
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special)
      : IncrementalDetokenizer(tokenizer, {}, skip_special) {}

  // The text that became final with `id`; may be empty (incomplete UTF-8 or a space clean-up may still
  // remove is held back). Ids that Decode ignores (skipped special tokens, ids outside the vocabulary) return
  // "" and change nothing. Must not be called after Flush.
  std::string Add(int32_t id);
  // The text still held back; the stream is over after this.
  std::string Flush();

  // Tokens in the current window (for tests of the O(1) bound).
  size_t window_size() const { return window_.size(); }

 private:
  std::string DecodeWindow(std::span<const int32_t> ids) const;
  // How much of `text` (the window's text) is final: all but the tail that later tokens may still change.
  size_t FinalEnd(const std::string& text) const;
  void MaybeSlide();

  Tokenizer tokenizer_;  // shares the tables
  bool skip_special_;
  bool clean_up_;
  std::vector<int32_t> window_;  // context tokens, then tokens whose text is not (all) out yet
  std::string text_;             // DecodeWindow(window_) as of the last call
  size_t emitted_ = 0;           // bytes of text_ already returned (or belonging to the prompt)
  size_t next_slide_ = 2 * kContextTokens;  // window size at which to try sliding
  bool flushed_ = false;
};

}  // namespace parallm
