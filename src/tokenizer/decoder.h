// Decoders of tokenizer.json ("decoder"): token pieces -> text. ByteLevel, Metaspace, ByteFallback, Fuse,
// Strip, Replace and Sequence, with tokenizers.js's semantics (invalid UTF-8 becomes U+FFFD per the WHATWG
// decoder; added tokens pass through ByteLevel unchanged).
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include <boost/json.hpp>

#include "util/status.h"

namespace parallm {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Transforms the list of pieces; the text is the concatenation of the result.
  virtual void DecodeChain(std::vector<std::string>& pieces) const = 0;

  // `added_contents`: contents of the added tokens, which ByteLevel leaves as they are. Null JSON gives a null
  // pointer (pieces joined with spaces, as tokenizers.js does without a decoder).
  static Result<std::unique_ptr<Decoder>> FromJson(const boost::json::value& json,
                                                   const std::unordered_set<std::string>& added_contents);
  static std::unique_ptr<Decoder> ByteLevel(const std::unordered_set<std::string>& added_contents);
  // SentencePiece: U+2581 -> space, <0xXX> runs -> UTF-8, joined, one leading space removed.
  static std::unique_ptr<Decoder> SentencePiece();
};

// transformers' clean_up_tokenization: " ." -> ".", " n't" -> "n't", ... (applied when
// tokenizer_config.json's clean_up_tokenization_spaces is true).
std::string CleanUpTokenization(std::string text);

}  // namespace parallm
