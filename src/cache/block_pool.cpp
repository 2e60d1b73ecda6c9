// BlockPool: reference counts, the intrusive LRU free-block queue and the prefix-cache index of the KV blocks.
#include "cache/block_pool.h"

#include <algorithm>
#include <string>

#include "util/check.h"

namespace parallm {

// ---- FreeBlockQueue ---------------------------------------------------------------------------------------

void FreeBlockQueue::Append(Block* b) {
  PARALLM_CHECK_MSG(!b->in_free_queue, "block appended to the free queue twice");
  b->prev_free = tail_;
  b->next_free = nullptr;
  if (tail_ != nullptr) {
    tail_->next_free = b;
  } else {
    head_ = b;
  }
  tail_ = b;
  b->in_free_queue = true;
  ++size_;
}

Block* FreeBlockQueue::PopFront() {
  Block* b = head_;
  if (b != nullptr) Remove(b);
  return b;
}

void FreeBlockQueue::Remove(Block* b) {
  PARALLM_CHECK_MSG(b->in_free_queue, "removing a block that is not in the free queue");
  if (b->prev_free != nullptr) {
    b->prev_free->next_free = b->next_free;
  } else {
    head_ = b->next_free;
  }
  if (b->next_free != nullptr) {
    b->next_free->prev_free = b->prev_free;
  } else {
    tail_ = b->prev_free;
  }
  b->prev_free = nullptr;
  b->next_free = nullptr;
  b->in_free_queue = false;
  --size_;
}

std::vector<int32_t> FreeBlockQueue::Ids() const {
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(size_));
  // Bounded by size_ + 1 so that a corrupted (cyclic) list shows up in CheckIntegrity instead of hanging.
  for (const Block* b = head_; b != nullptr && static_cast<int32_t>(ids.size()) <= size_; b = b->next_free) {
    ids.push_back(b->id);
  }
  return ids;
}

// ---- BlockPool --------------------------------------------------------------------------------------------

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching)
    : block_size_(block_size), enable_prefix_caching_(enable_prefix_caching), blocks_(static_cast<size_t>(num_blocks)) {
  PARALLM_CHECK_MSG(num_blocks > 0 && block_size > 0, "a block pool needs blocks of at least one token");
  // blocks_ never resizes after this, so the queue's Block* stay valid.
  for (int32_t i = 0; i < num_blocks; ++i) {
    blocks_[static_cast<size_t>(i)].id = i;
    free_.Append(&blocks_[static_cast<size_t>(i)]);
  }
}

std::vector<int32_t> BlockPool::Allocate(int32_t n) {
  PARALLM_CHECK_MSG(n >= 0 && n <= free_.size(), "Allocate asked for more blocks than are free");
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    Block* b = free_.PopFront();
    Evict(*b);
    b->ref_count = 1;
    ids.push_back(b->id);
  }
  return ids;
}

std::optional<int32_t> BlockPool::Lookup(BlockHash hash, std::span<const int32_t> tokens) const {
  auto it = cached_.find(hash);
  if (it == cached_.end()) return std::nullopt;
  const Block& b = block(it->second);
  // Equal hashes with different tokens are a collision, not a hit.
  if (!std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end())) return std::nullopt;
  return it->second;
}

void BlockPool::Touch(std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    Block& b = block(id);
    if (b.ref_count == 0) free_.Remove(&b);
    ++b.ref_count;
  }
}

void BlockPool::Cache(int32_t id, BlockHash hash, std::span<const int32_t> tokens, uint64_t parent_key,
                      int32_t int8_offset) {
  if (!enable_prefix_caching_) return;
  PARALLM_CHECK_MSG(static_cast<int32_t>(tokens.size()) == block_size_, "only full blocks are cached");
  Block& b = block(id);
  if (b.hash) {
    // Already cached (a shared prefix block): its content cannot have changed.
    PARALLM_CHECK_MSG(*b.hash == hash, "a cached block was re-cached under another hash");
    return;
  }
  // Another block already holds this content (or a colliding one): keep the existing mapping.
  if (!cached_.try_emplace(hash, id).second) return;
  b.hash = hash;
  b.tokens.assign(tokens.begin(), tokens.end());
  Index(b, parent_key, int8_offset);
}

void BlockPool::CacheTail(int32_t id, uint64_t parent_key, std::span<const int32_t> tokens, int32_t int8_offset) {
  if (!enable_prefix_caching_) return;
  Block& b = block(id);
  PARALLM_CHECK_MSG(!tokens.empty() && static_cast<int32_t>(tokens.size()) < block_size_,
                    "a tail holds between one token and a block's less one");
  PARALLM_CHECK_MSG(b.ref_count == 0 && !b.hash && !b.is_child, "only a free, uncached block becomes a tail");
  b.tokens.assign(tokens.begin(), tokens.end());
  Index(b, parent_key, int8_offset);
}

uint64_t BlockPool::ChildKey(uint64_t parent_key, int32_t first_token) {
  // splitmix64's finalizer over the pair: a shared prefix's many continuations spread over many keys.
  uint64_t x = parent_key ^ (static_cast<uint64_t>(static_cast<uint32_t>(first_token)) * 0x9e3779b97f4a7c15ULL);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

void BlockPool::Index(Block& b, uint64_t parent_key, int32_t int8_offset) {
  b.is_child = true;
  b.parent_key = parent_key;
  b.int8_offset = int8_offset;
  children_.emplace(ChildKey(parent_key, b.tokens.front()), b.id);
}

std::pair<BlockPool::ChildIndex::const_iterator, BlockPool::ChildIndex::const_iterator> BlockPool::ChildEntries(
    const Block& b) const {
  return children_.equal_range(ChildKey(b.parent_key, b.tokens.front()));
}

std::vector<int32_t> BlockPool::Children(uint64_t parent_key, int32_t first_token) const {
  std::vector<int32_t> ids;
  auto [first, last] = children_.equal_range(ChildKey(parent_key, first_token));
  for (auto it = first; it != last; ++it) {
    const Block& b = block(it->second);
    if (b.parent_key == parent_key && b.tokens.front() == first_token) ids.push_back(b.id);  // not a mere key clash
  }
  return ids;
}

void BlockPool::Free(std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    Block& b = block(id);
    PARALLM_CHECK_MSG(b.ref_count > 0, "freeing a block with no references");
    if (--b.ref_count == 0) free_.Append(&b);
  }
}

void BlockPool::Evict(Block& b) {
  if (b.is_child) {
    auto [first, last] = ChildEntries(b);
    auto it = std::find_if(first, last, [&](const auto& entry) { return entry.second == b.id; });
    PARALLM_CHECK_MSG(it != last, "indexed block missing from the children index");
    children_.erase(it);
    b.is_child = false;
  }
  b.tokens.clear();
  if (!b.hash) return;
  auto it = cached_.find(*b.hash);
  PARALLM_CHECK_MSG(it != cached_.end() && it->second == b.id, "cached block missing from the index");
  cached_.erase(it);
  b.hash.reset();
}

void BlockPool::CheckIntegrity() const {
  int32_t num_queued = 0;
  int32_t num_hashed = 0;
  int32_t num_children = 0;
  for (const Block& b : blocks_) {
    const std::string where = "block " + std::to_string(b.id);
    PARALLM_CHECK_MSG(b.ref_count >= 0, where.c_str());
    PARALLM_CHECK_MSG(b.in_free_queue == (b.ref_count == 0), where.c_str());
    if (!b.in_free_queue) PARALLM_CHECK_MSG(b.prev_free == nullptr && b.next_free == nullptr, where.c_str());
    num_queued += b.in_free_queue ? 1 : 0;
    if (b.hash) {
      ++num_hashed;
      PARALLM_CHECK_MSG(enable_prefix_caching_, where.c_str());
      auto it = cached_.find(*b.hash);
      PARALLM_CHECK_MSG(it != cached_.end() && it->second == b.id, where.c_str());
      PARALLM_CHECK_MSG(static_cast<int32_t>(b.tokens.size()) == block_size_, where.c_str());
    } else if (b.is_child) {  // a tail: its first slots' tokens (free, or held while it is copied from)
      PARALLM_CHECK_MSG(!b.tokens.empty() && static_cast<int32_t>(b.tokens.size()) < block_size_,
                        (where + ": a tail of no tokens or of a whole block").c_str());
    } else {
      PARALLM_CHECK_MSG(b.tokens.empty(), where.c_str());
    }
    if (b.is_child) {
      ++num_children;
      auto [first, last] = ChildEntries(b);
      PARALLM_CHECK_MSG(std::count_if(first, last, [&](const auto& entry) { return entry.second == b.id; }) == 1,
                        (where + ": indexed as a child but not once under its parent").c_str());
      PARALLM_CHECK_MSG(b.int8_offset >= 0 && b.int8_offset <= block_size_, where.c_str());
    }
  }
  PARALLM_CHECK_MSG(num_hashed == static_cast<int32_t>(cached_.size()), "cache index has entries without blocks");
  PARALLM_CHECK_MSG(num_children == static_cast<int32_t>(children_.size()),
                    "children index has entries without blocks");
  for (const auto& [hash, id] : cached_) {
    PARALLM_CHECK_MSG(id >= 0 && id < num_blocks(), "cache index names a block out of range");
    PARALLM_CHECK_MSG(block(id).hash == hash, "cache index disagrees with the block's hash");
  }
  // Walk the queue by its links: every queued block once, prev/next consistent.
  PARALLM_CHECK_MSG(num_queued == free_.size(), "free queue size differs from the number of free blocks");
  std::vector<int32_t> ids = free_.Ids();
  PARALLM_CHECK_MSG(static_cast<int32_t>(ids.size()) == free_.size(), "free queue links skip or repeat blocks");
  const Block* prev = nullptr;
  for (int32_t id : ids) {
    const Block& b = block(id);
    PARALLM_CHECK_MSG(b.in_free_queue, "free queue holds a block not marked free");
    PARALLM_CHECK_MSG(b.prev_free == prev, "free queue back link broken");
    prev = &b;
  }
}

}  // namespace parallm
