// TokenTrie: building the preorder trie (tokens sorted by bytes).
#include "structured/token_trie.h"

#include <algorithm>

namespace parallm::structured {

TokenTrie TokenTrie::Build(const std::vector<std::string>& bytes, std::vector<int32_t> order, int32_t mask_words) {
  TokenTrie t;
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return bytes[static_cast<size_t>(a)] < bytes[static_cast<size_t>(b)]; });
  std::vector<int32_t> path;  // node index per depth - 1, along the last inserted token
  // Closes the deepest open node: its subtree ends here; its byte and the bytes below it go to its parent.
  auto close = [&] {
    const size_t n = static_cast<size_t>(path.back());
    path.pop_back();
    t.nodes_[n].skip = static_cast<int32_t>(t.nodes_.size());
    if (!path.empty()) {
      ByteBits& up = t.below_[static_cast<size_t>(path.back())];
      for (size_t k = 0; k < 4; ++k) up[k] |= t.below_[n][k];
      up[t.nodes_[n].byte >> 6] |= uint64_t{1} << (t.nodes_[n].byte & 63);
    }
  };
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& w = bytes[static_cast<size_t>(id)];
    size_t common = 0;
    if (prev != nullptr)
      while (common < prev->size() && common < w.size() && (*prev)[common] == w[common]) ++common;
    while (path.size() > common) close();
    for (size_t i = common; i < w.size(); ++i) {
      path.push_back(static_cast<int32_t>(t.nodes_.size()));
      t.nodes_.push_back({static_cast<uint8_t>(w[i]), static_cast<uint16_t>(i + 1), 0});
      t.first_token_.push_back(static_cast<int32_t>(t.token_ids_.size()));
      t.below_.push_back({0, 0, 0, 0});
    }
    t.token_ids_.push_back(id);
    t.max_depth_ = std::max(t.max_depth_, static_cast<int32_t>(w.size()));
    prev = &w;
  }
  while (!path.empty()) close();
  t.first_token_.push_back(static_cast<int32_t>(t.token_ids_.size()));
  t.tokens_.assign(static_cast<size_t>(mask_words), 0u);
  for (int32_t id : t.token_ids_) t.tokens_[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
  return t;
}

}  // namespace parallm::structured
