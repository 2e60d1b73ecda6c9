// BpeModel: byte-pair encoding by merge rank (tokenizer.json "BPE" models, GGUF "gpt2"). Each word is merged
// with a heap of candidate pairs over a linked list of symbols, O(n log n) in the word length, and results for
// short words are cached.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/token_model.h"

namespace parallm {

struct BpeOptions {
  bool byte_fallback = false;  // characters outside the vocabulary become <0xXX> byte tokens
  bool ignore_merges = false;  // a word that is itself in the vocabulary is emitted whole
  bool fuse_unk = false;       // consecutive unknown tokens become one
  int32_t unk_id = -1;         // -1: unknown pieces are dropped
};

class BpeModel : public TokenModel {
 public:
  // `vocab`: piece -> id (tokenizers.js also looks added tokens up here). `merges` in priority order; a merge
  // whose parts or result are not in the vocabulary is ignored.
  BpeModel(std::unordered_map<std::string, int32_t> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
           BpeOptions options);

  void Encode(const std::vector<std::string>& words, std::vector<int32_t>& ids) const override;
  // The ids of one word (cached when short).
  void EncodeWord(std::string_view word, std::vector<int32_t>& ids) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void MergeWord(std::string_view word, std::vector<int32_t>& ids) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<int32_t> byte_ids_;  // <0xXX> ids when byte_fallback, else empty
  BpeOptions options_;

  // word -> ids for words up to kMaxCachedWordBytes; cleared when it reaches kCacheCapacity entries.
  static constexpr size_t kMaxCachedWordBytes = 256;
  static constexpr size_t kCacheCapacity = 1 << 16;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace parallm
