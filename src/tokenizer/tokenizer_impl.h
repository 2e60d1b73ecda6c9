// Tokenizer::Impl: the assembled pipeline (added tokens, normalizer, pre-tokenizer, model, post-processor,
// decoder) that the loaders fill in and Encode/Decode run. Internal to src/tokenizer.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/token_model.h"
#include "tokenizer/tokenizer.h"

namespace parallm {

struct Tokenizer::Impl {
  Vocab vocab;
  std::unordered_map<std::string, int32_t> piece_to_id;  // vocab pieces, added tokens last (they win)

  std::vector<AddedToken> added;
  // Content (and, for normalized tokens, normalized content) -> index in `added`: a section equal to one of
  // these is that token (tokenizers.js's added_tokens_map).
  std::unordered_map<std::string, int32_t> added_by_text;
  // Matchers over raw text (tokens with normalized=false) and over normalized text, with and without specials.
  AddedTokenMatcher raw_all, raw_plain, normalized_all, normalized_plain;

  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<TokenModel> model;
  std::vector<int32_t> prefix_ids, suffix_ids;  // what add_special puts around the ids
  std::unique_ptr<Decoder> decoder;
  std::vector<bool> special;  // per id: dropped by Decode(skip_special)
  bool clean_up_spaces = false;

  // Fills the matchers, added_by_text, piece_to_id and `special` from `added` and `vocab`; call after both
  // are set (and the normalizer, which normalized tokens go through).
  void IndexAddedTokens();
};

}  // namespace parallm
