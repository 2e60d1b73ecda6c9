// Score-ordered merging of SentencePiece pieces (llama.cpp's llm_tokenizer_spm, llama2.c's encode).
#include "tokenizer/spm.h"

#include <queue>

#include <fmt/format.h>

#include "tokenizer/unicode.h"

namespace parallm {

SpmModel::SpmModel(const std::vector<std::string>& pieces, const std::vector<float>& scores,
                   const std::vector<bool>& unmergeable, int32_t unk_id)
    : scores_(scores), unk_id_(unk_id) {
  scores_.resize(pieces.size(), 0.0f);
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i < unmergeable.size() && unmergeable[i]) continue;
    piece_to_id_.emplace(pieces[i], static_cast<int32_t>(i));  // the first id of a duplicated piece wins
  }
  byte_ids_.assign(256, -1);
  std::unordered_map<std::string, int32_t> all;
  for (size_t i = 0; i < pieces.size(); ++i) all.emplace(pieces[i], static_cast<int32_t>(i));
  for (int b = 0; b < 256; ++b) {
    auto it = all.find(fmt::format("<0x{:02X}>", b));
    if (it != all.end()) byte_ids_[static_cast<size_t>(b)] = it->second;
  }
}

void SpmModel::Encode(const std::vector<std::string>& words, std::vector<int32_t>& ids) const {
  for (const std::string& w : words) EncodeWord(w, ids);
}

void SpmModel::EncodeWord(const std::string& word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  struct Symbol {
    int32_t prev, next;
    uint32_t begin, end;  // byte range in `word`; empty once merged into its left neighbour
  };
  std::vector<Symbol> symbols;
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::min(unicode::SequenceLength(static_cast<unsigned char>(word[i])), word.size() - i);
    const int32_t self = static_cast<int32_t>(symbols.size());
    symbols.push_back({self - 1, self + 1, static_cast<uint32_t>(i), static_cast<uint32_t>(i + n)});
    i += n;
  }
  symbols.back().next = -1;

  struct Bigram {
    float score;
    int32_t left, right;
    uint32_t size;  // bytes of the merged piece, to detect stale entries
    bool operator<(const Bigram& o) const { return score != o.score ? score < o.score : left > o.left; }
  };
  std::priority_queue<Bigram> heap;  // highest score first, then leftmost
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    auto it = piece_to_id_.find(word.substr(l.begin, r.end - l.begin));
    if (it == piece_to_id_.end()) return;
    heap.push({scores_[static_cast<size_t>(it->second)], left, right, r.end - l.begin});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!heap.empty()) {
    const Bigram top = heap.top();
    heap.pop();
    Symbol& l = symbols[static_cast<size_t>(top.left)];
    Symbol& r = symbols[static_cast<size_t>(top.right)];
    if (l.begin == l.end || r.begin == r.end || l.next != top.right || r.end - l.begin != top.size) continue;
    l.end = r.end;
    r.begin = r.end;  // merged away
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = top.left;
    try_add(l.prev, top.left);
    try_add(top.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& s = symbols[static_cast<size_t>(i)];
    auto it = piece_to_id_.find(word.substr(s.begin, s.end - s.begin));
    if (it != piece_to_id_.end()) {
      ids.push_back(it->second);
      continue;
    }
    bool bytes_ok = true;
    for (uint32_t k = s.begin; bytes_ok && k < s.end; ++k) bytes_ok = byte_ids_[static_cast<uint8_t>(word[k])] >= 0;
    if (bytes_ok) {
      for (uint32_t k = s.begin; k < s.end; ++k) ids.push_back(byte_ids_[static_cast<uint8_t>(word[k])]);
    } else if (unk_id_ >= 0) {
      ids.push_back(unk_id_);
    }
  }
}

}  // namespace parallm
