// Tokenizer: text -> token ids and back, exactly as the model's own tokenizer does it. Built from a Hugging
// Face tokenizer.json (byte-level BPE: Llama 3, Qwen2/3, GPT-2; SentencePiece-style BPE: Llama 2, Phi-3, Gemma),
// from a GGUF vocabulary (llama.cpp's "gpt2" and "llama" models) or from a llama2.c tokenizer.bin.
//
// Encoding runs the tokenizer.json pipeline: added tokens are cut out of the raw text (leftmost-longest), each
// remaining section is normalized, normalized added tokens are cut out, the rest is pre-tokenized into words,
// the model turns words into ids, and the post-processor adds BOS/EOS. The reference for every step is Hugging
// Face's tokenizers.js (@huggingface/tokenizers); tests/tokenizer compares against its output on a corpus.
//
// Invalid UTF-8: Encode first replaces every maximal invalid byte sequence by U+FFFD (EF BF BD), exactly as
// JavaScript's TextDecoder and Rust's String::from_utf8_lossy do, and then encodes that text; so
// Encode(bytes) == Encode(ToValidUtf8(bytes)). (A lone surrogate in a JavaScript string reaches tokenizers.js's
// byte-level step as U+FFFD too, since TextEncoder writes it that way.) Decode returns valid UTF-8: byte
// tokens that do not form UTF-8 become U+FFFD by the same rule.
//
// Thread-safe: a Tokenizer is immutable after construction apart from an internal, locked word cache, and
// copies share their tables.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"
#include "util/status.h"

namespace parallm {

class GgufFile;
struct Llama2cTokenizer;

class Tokenizer {
 public:
  // tokenizer.json, with tokenizer_config.json beside it when present (bos_token, eos_token,
  // clean_up_tokenization_spaces, additional_special_tokens). BOS/EOS are added by the tokenizer.json
  // post_processor, as transformers and tokenizers.js do.
  static Result<Tokenizer> FromTokenizerJson(const std::string& path);
  // tokenizer.ggml.*: model "gpt2" (byte-level BPE with merges; the split regexes are chosen by
  // tokenizer.ggml.pre: default/gpt-2, llama-bpe, qwen2, deepseek-llm, deepseek-coder, falcon, starcoder and
  // their llama.cpp aliases) or "llama" (SentencePiece scores). Control tokens are special added tokens,
  // user-defined tokens plain added tokens. BOS/EOS follow tokenizer.ggml.add_bos_token / add_eos_token.
  static Result<Tokenizer> FromGguf(const GgufFile& file, const std::string& path);
  // llama2.c's tokenizer.bin: run.c's encode (dummy-prefix space, highest-score pair merged first, bytes for
  // unknown characters); special-token text is never parsed. BOS is added when add_special.
  static Tokenizer FromLlama2c(const Llama2cTokenizer& tok);

  // add_special: add BOS/EOS as the tokenizer's configuration says. parse_special: text of special (control)
  // tokens such as "<|im_end|>" becomes that token only when true; otherwise it is encoded as plain text.
  // Added tokens that are not special are always matched.
  std::vector<int32_t> Encode(std::string_view text, bool add_special, bool parse_special) const;
  // The text of `ids`; skip_special drops special tokens. Ids outside the vocabulary are skipped.
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const;

  const Vocab& vocab() const;
  int32_t size() const { return vocab().size(); }
  int32_t bos_id() const { return vocab().bos; }  // -1 when there is none
  int32_t eos_id() const { return vocab().eos; }
  // The token's piece as the vocabulary stores it ("Ġthe", "▁the", "<|im_end|>"); empty when out of range.
  const std::string& TokenText(int32_t id) const;
  bool IsSpecial(int32_t id) const;
  std::optional<int32_t> TokenToId(std::string_view piece) const;
  // Whether Decode applies transformers' clean_up_tokenization (from tokenizer_config.json).
  bool clean_up_tokenization_spaces() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace parallm
