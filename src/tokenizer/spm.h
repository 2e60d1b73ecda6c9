// SpmModel: SentencePiece-style BPE by piece score, as llama.cpp encodes GGUF "llama" vocabularies and
// llama2.c's run.c encodes with tokenizer.bin: repeatedly merge the adjacent pair whose concatenation is the
// highest-scoring piece (leftmost on ties). A heap over a symbol list keeps it O(n log n).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/token_model.h"

namespace parallm {

class SpmModel : public TokenModel {
 public:
  // `pieces[i]` with score `scores[i]` is token i. Pieces of `unmergeable` ids (control, byte, unused tokens)
  // are never produced by merging. Characters outside the vocabulary become <0xXX> tokens, else `unk_id`.
  SpmModel(const std::vector<std::string>& pieces, const std::vector<float>& scores,
           const std::vector<bool>& unmergeable, int32_t unk_id);

  void Encode(const std::vector<std::string>& words, std::vector<int32_t>& ids) const override;

 private:
  void EncodeWord(const std::string& word, std::vector<int32_t>& ids) const;
  std::unordered_map<std::string, int32_t> piece_to_id_;
  std::vector<float> scores_;
  std::vector<int32_t> byte_ids_;
  int32_t unk_id_;
};

}  // namespace parallm
