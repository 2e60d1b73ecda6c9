// Vocab: a model's token table as GGUF stores it (tokenizer.ggml.*): pieces, scores, types, merges and
// special ids. Used to carry a vocabulary between formats and to turn ids back into text. Encoding text,
// tokenizer.json and chat templates build on it (tokenizer issue).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "util/status.h"

namespace parallm {

class GgufFile;
class GgufWriter;
struct Llama2cTokenizer;

// llama.cpp's token types (llama_token_type).
enum class TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct Vocab {
  // "llama" (SentencePiece pieces with U+2581 for space), "gpt2" (byte-level BPE), or "hf-sentencepiece"
  // (a SentencePiece-style tokenizer.json: decodable, but not writable to GGUF).
  std::string model;
  bool WritableToGguf() const { return model == "llama" || model == "gpt2"; }
  std::vector<std::string> tokens;
  std::vector<float> scores;      // llama only
  std::vector<int32_t> types;     // TokenType values
  std::vector<std::string> merges;  // gpt2 only: "a b"
  int32_t bos = -1, eos = -1, unk = -1;
  bool add_bos = false;
  std::string chat_template;  // tokenizer.chat_template (Jinja source); empty when none

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }

  // Reads tokenizer.ggml.*; errors when the arrays are missing or inconsistent.
  static Result<Vocab> FromGguf(const GgufFile& file, const std::string& path);
  // A llama2.c tokenizer.bin as a SentencePiece-style vocabulary (ids 0 <unk>, 1 <s>, 2 </s>, 3..258 bytes).
  static Vocab FromLlama2c(const Llama2cTokenizer& tok);
  // A Hugging Face BPE tokenizer.json (with tokenizer_config.json beside it for BOS/EOS, when present).
  // Byte-level BPE (GPT-2, Llama 3, Qwen2/3) becomes the GGUF "gpt2" layout; SentencePiece-style BPE (Llama 2,
  // Phi-3, Gemma) gets model "hf-sentencepiece", which GGUF cannot hold (it takes scores from tokenizer.model).
  static Result<Vocab> FromTokenizerJson(const std::string& path);
  // Pads with unused "<|extra_N|>" tokens to `size` (models pad vocabularies to a round number).
  void PadTo(int32_t size);
  // The built-in byte-level vocabulary for generated models: 256 byte tokens, <|bos|>, <|eos|>, then
  // <|extra_N|> fillers up to `size` (>= 258).
  static Vocab ByteLevel(int32_t size);

  void WriteGguf(GgufWriter& writer) const;

  // Text of `ids`, skipping control tokens; SentencePiece rules for "llama" (U+2581 -> space, <0xXX> bytes,
  // the leading space of the text dropped), byte-level decoding for "gpt2". Invalid UTF-8 is kept as bytes.
  std::string Decode(std::span<const int32_t> ids) const;
};

}  // namespace parallm
