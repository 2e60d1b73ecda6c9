// Normalizers of tokenizer.json ("normalizer"): text -> text before added-token matching and pre-tokenization.
// NFC/NFD/NFKC/NFKD, Lowercase, Strip, Replace, Prepend, Sequence; semantics of tokenizers.js.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <boost/json.hpp>

#include "util/status.h"

namespace parallm {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` is valid UTF-8; so is the result.
  virtual std::string Normalize(std::string text) const = 0;

  // Builds from a tokenizer.json "normalizer" value; null JSON gives a null pointer (no normalization).
  static Result<std::unique_ptr<Normalizer>> FromJson(const boost::json::value& json);
  // The SentencePiece convention as a normalizer: prepend U+2581 and replace every space by U+2581.
  static std::unique_ptr<Normalizer> SentencePieceSpaces();
};

}  // namespace parallm
