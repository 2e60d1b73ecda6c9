// Rank-ordered BPE merging with a heap and a symbol list, byte fallback and unknown-token fusion.
#include "tokenizer/bpe.h"

#include <queue>

#include <fmt/format.h>

#include "tokenizer/unicode.h"

namespace parallm {

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options)
    : vocab_(std::move(vocab)), options_(options) {
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto ia = vocab_.find(a), ib = vocab_.find(b), im = vocab_.find(a + b);
    if (ia == vocab_.end() || ib == vocab_.end() || im == vocab_.end()) continue;
    // The first (highest-priority) occurrence of a pair wins, as in a rank map built in order.
    merges_.emplace(PairKey(ia->second, ib->second), Merge{static_cast<int32_t>(rank), im->second});
  }
  if (options_.byte_fallback) {
    byte_ids_.assign(256, -1);
    for (int b = 0; b < 256; ++b) {
      auto it = vocab_.find(fmt::format("<0x{:02X}>", b));
      if (it != vocab_.end()) byte_ids_[static_cast<size_t>(b)] = it->second;
    }
  }
}

void BpeModel::Encode(const std::vector<std::string>& words, std::vector<int32_t>& ids) const {
  const size_t first = ids.size();
  for (const std::string& w : words) EncodeWord(w, ids);
  if (options_.fuse_unk && options_.unk_id >= 0) {
    size_t out = first;
    for (size_t i = first; i < ids.size(); ++i)
      if (!(ids[i] == options_.unk_id && out > first && ids[out - 1] == options_.unk_id)) ids[out++] = ids[i];
    ids.resize(out);
  }
}

void BpeModel::EncodeWord(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    auto it = vocab_.find(std::string(word));
    if (it != vocab_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  std::string key;
  if (cacheable) {
    key.assign(word);
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> result;
  MergeWord(word, result);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheCapacity) cache_.clear();
    cache_.emplace(std::move(key), result);
  }
  ids.insert(ids.end(), result.begin(), result.end());
}

void BpeModel::MergeWord(std::string_view word, std::vector<int32_t>& ids) const {
  // One symbol per character; id -1 marks a character outside the vocabulary (never merged).
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    uint32_t begin, end;  // byte range in `word`
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  std::string ch;
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::min(unicode::SequenceLength(static_cast<unsigned char>(word[i])), word.size() - i);
    ch.assign(word.substr(i, n));
    auto it = vocab_.find(ch);
    const int32_t self = static_cast<int32_t>(symbols.size());
    symbols.push_back({it != vocab_.end() ? it->second : -1, self - 1, self + 1, static_cast<uint32_t>(i),
                       static_cast<uint32_t>(i + n)});
    i += n;
  }
  symbols.back().next = -1;

  // Candidate merges: lowest rank first, then leftmost (the left symbol's original position).
  struct Candidate {
    int32_t rank, pos, id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push_pair = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = symbols[static_cast<size_t>(left)].next;
    if (right < 0) return;
    const int32_t a = symbols[static_cast<size_t>(left)].id, b = symbols[static_cast<size_t>(right)].id;
    if (a < 0 || b < 0) return;
    auto it = merges_.find(PairKey(a, b));
    if (it != merges_.end()) heap.push({it->second.rank, left, it->second.id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push_pair(i);

  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (left.id < 0 || left.next < 0) continue;  // merged away, or no right neighbour any more
    const Symbol& right = symbols[static_cast<size_t>(left.next)];
    auto it = merges_.find(PairKey(left.id, right.id));
    if (it == merges_.end() || it->second.id != top.id) continue;  // stale: the pair has changed
    const int32_t dead = left.next;
    left.id = top.id;
    left.end = right.end;
    left.next = right.next;
    if (left.next >= 0) symbols[static_cast<size_t>(left.next)].prev = top.pos;
    symbols[static_cast<size_t>(dead)].id = -2;  // removed from the list
    symbols[static_cast<size_t>(dead)].next = -1;
    push_pair(left.prev);
    push_pair(top.pos);
  }

  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& s = symbols[static_cast<size_t>(i)];
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    bool bytes_ok = !byte_ids_.empty();
    for (uint32_t k = s.begin; bytes_ok && k < s.end; ++k) bytes_ok = byte_ids_[static_cast<uint8_t>(word[k])] >= 0;
    if (bytes_ok) {
      for (uint32_t k = s.begin; k < s.end; ++k) ids.push_back(byte_ids_[static_cast<uint8_t>(word[k])]);
    } else if (options_.unk_id >= 0) {
      ids.push_back(options_.unk_id);
    }
  }
}

}  // namespace parallm
