// BlockPool: every KV block of the model's PagedKvStorage, their reference counts, the prefix-cache index
// (BlockHash -> block, and parent prefix -> the blocks that follow it) and the free-block queue. A freed block keeps
// its cached content until it is reused; the queue hands out least recently freed blocks first (LRU eviction of cached
// prefixes).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "cache/block_hash.h"

namespace parallm {

struct Block {
  int32_t id = 0;
  int32_t ref_count = 0;               // requests using the block
  std::optional<BlockHash> hash;       // set once the block is full and cached
  // The token ids whose K/V the block holds from its first slot: a cached block's block_size (kept to detect hash
  // collisions), a tail's fewer; empty otherwise.
  std::vector<int32_t> tokens;
  // Indexed as a child (Children): a cached full block, or a tail (a request's partly filled last block, indexed
  // when the request freed it). parent_key names the prefix before it (KVCacheManager's chain); its slots from
  // int8_offset on were computed by MatMul's int8 formula, the ones before by the bf16 formula.
  bool is_child = false;
  uint64_t parent_key = 0;
  int32_t int8_offset = 0;
  // Intrusive links of the free queue (null when not queued).
  Block* prev_free = nullptr;
  Block* next_free = nullptr;
  bool in_free_queue = false;
};

// Doubly linked list of free blocks threaded through Block itself: O(1) pop from the front, append at the
// back, and removal from the middle (when a cached free block is hit again).
class FreeBlockQueue {
 public:
  void Append(Block* b);
  Block* PopFront();  // nullptr when empty
  void Remove(Block* b);
  int32_t size() const { return size_; }
  // Block ids front to back (tests assert exact order).
  std::vector<int32_t> Ids() const;

 private:
  Block* head_ = nullptr;
  Block* tail_ = nullptr;
  int32_t size_ = 0;
};

class BlockPool {
 public:
  // All blocks start free, in id order: block 0 is handed out first.
  BlockPool(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t num_free_blocks() const { return free_.size(); }
  bool prefix_caching() const { return enable_prefix_caching_; }
  Block& block(int32_t id) { return blocks_[static_cast<size_t>(id)]; }
  const Block& block(int32_t id) const { return blocks_[static_cast<size_t>(id)]; }

  // Pops `n` blocks from the free queue front (evicting their cached hashes), each with ref_count 1.
  // Precondition: n <= num_free_blocks().
  std::vector<int32_t> Allocate(int32_t n);
  // The cached block holding exactly these tokens after `parent`, if any (hash match and equal tokens).
  std::optional<int32_t> Lookup(BlockHash hash, std::span<const int32_t> tokens) const;
  // Takes a reference on cached blocks found by Lookup (removing them from the free queue if unused).
  void Touch(std::span<const int32_t> ids);
  // Marks a full block as cached under `hash` with `tokens` (no-op without prefix caching, or when another block
  // already caches that content), and indexes it as a child of `parent_key` (see Block).
  void Cache(int32_t id, BlockHash hash, std::span<const int32_t> tokens, uint64_t parent_key = 0,
             int32_t int8_offset = 0);
  // Indexes a free, uncached block as a tail: its first tokens.size() slots (1 to block_size - 1) hold the K/V of
  // `tokens` after the prefix `parent_key`. It stays findable until the block is handed out again (no-op without
  // prefix caching).
  void CacheTail(int32_t id, uint64_t parent_key, std::span<const int32_t> tokens, int32_t int8_offset);
  // The blocks indexed as children of `parent_key` whose first token is `first_token`: cached full blocks and tails,
  // any order.
  std::vector<int32_t> Children(uint64_t parent_key, int32_t first_token) const;
  // Drops one reference from each block; blocks reaching 0 go to the free queue's back in the given order
  // (callers pass a request's blocks last-first, so its tail is evicted before its shared prefix).
  void Free(std::span<const int32_t> ids);

  // Aborts with a message if any invariant is broken: ref counts >= 0, a block is in the free queue iff its
  // ref count is 0, the cache index and the blocks' hashes agree, the queue's links are consistent.
  void CheckIntegrity() const;
  std::vector<int32_t> FreeQueueIds() const { return free_.Ids(); }
  int32_t num_cached_blocks() const { return static_cast<int32_t>(cached_.size()); }

 private:
  void Evict(Block& b);  // out of both indexes: the block is about to be written
  void Index(Block& b, uint64_t parent_key, int32_t int8_offset);  // b.tokens set first
  static uint64_t ChildKey(uint64_t parent_key, int32_t first_token);
  using ChildIndex = std::unordered_multimap<uint64_t, int32_t>;
  // The entries of b's key in the children index (b's own among them when b.is_child).
  std::pair<ChildIndex::const_iterator, ChildIndex::const_iterator> ChildEntries(const Block& b) const;

  int32_t block_size_;
  bool enable_prefix_caching_;
  std::vector<Block> blocks_;
  FreeBlockQueue free_;
  std::unordered_map<BlockHash, int32_t> cached_;  // content hash -> block id
  ChildIndex children_;  // ChildKey(parent key, first token) -> block id, for every Block::is_child
};

}  // namespace parallm
