// KVCacheManager: which blocks each request's tokens live in. Finds a new request's cached prefix (full blocks whose
// chained hashes match, then the start of a block that followed them), allocates blocks as requests grow, caches
// blocks once full, frees a request's blocks when it finishes or is preempted, and keeps the statistics. For hybrid
// models it also hands each request its recurrent-state slot (cache/ssm_state.h), with the same lifetime as its blocks.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "cache/block_pool.h"
#include "cache/ssm_state.h"

namespace parallm {

using RequestId = uint64_t;

struct KVCacheStats {
  int64_t queries = 0;             // GetComputedBlocks calls (new requests or resumed ones)
  int64_t hits = 0;                // every full prompt block was cached
  int64_t partial_hits = 0;        // some but not all
  int64_t misses = 0;              // none
  int64_t query_tokens = 0;        // prompt tokens looked up
  int64_t hit_tokens = 0;          // tokens found cached (prefill they skip), tails included
  int64_t tail_hits = 0;           // lookups that found tokens at the start of a block after their full blocks
  int64_t blocks_allocated = 0;    // fresh blocks handed out
  int64_t blocks_shared = 0;       // cached blocks reused by another request
  int64_t blocks_slid_out = 0;     // blocks released early, wholly behind a sliding window
};

// A block table entry whose block was released because it lies wholly behind the sliding window: attention
// never reads it again.
inline constexpr int32_t kNoBlock = -1;

struct ComputedBlocks {
  std::vector<int32_t> block_ids;  // cached full blocks of the prompt prefix, in order
  // The prompt's next tokens after them found at the start of another block (a cached block or a freed request's
  // last one): AllocateSlots copies that block into the request's next one. -1 and 0: none.
  int32_t tail_block = -1;
  int32_t tail_tokens = 0;
  int32_t num_tokens = 0;  // = block_ids.size() * block_size + tail_tokens
};

class KVCacheManager {
 public:
  // `sliding_window` > 0 (a model whose every layer is windowed): a request's blocks that lie wholly before the
  // window of its next token are released as it advances, and its table keeps kNoBlock in their place.
  // `num_state_slots` > 0 (a hybrid model with recurrent state): every request also holds one state slot, taken by
  // its first AllocateSlots (which fails, changing nothing, when none is free: admission needs both blocks and a
  // slot) and released with its blocks by Free (finish, cancellation, preemption).
  KVCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching, int32_t sliding_window = 0,
                 int32_t num_state_slots = 0);

  // The longest cached prefix of `tokens`: whole blocks, then, token by token, the start of a block that followed the
  // same prefix (a cached block, or the partly filled last block of a request that has ended). At least one token is
  // always left to compute (the last prompt token must run to produce logits), so a prompt seen before computes just
  // its last token. Does not take references: pass the result to AllocateSlots.
  // `salt`: the request's LoRA adapter (0: base model), part of every block hash (HashBlockTokens).
  // `int8_from`: where a request's prompt runs on MatMul's bf16 formula, the first position the int8 formula computes
  // (model/forward_batch.h's Bf16PromptEnd; -1: one formula for all). Blocks holding that position or later are
  // hashed apart, so a block is reused only where a cold run would have computed it the same way.
  ComputedBlocks GetComputedBlocks(std::span<const int32_t> tokens, uint64_t salt = 0, int32_t int8_from = -1);

  // Makes room for `num_new_tokens` more tokens of request `id` (whose first `num_computed_tokens` are in its
  // blocks already, or in `new_computed` blocks from GetComputedBlocks on its first call). Returns false, and
  // changes nothing (but for releasing blocks behind a sliding window), when the pool has too few free blocks.
  // A tail in `new_computed` becomes a pending copy into the request's first fresh block (RunPendingCopies); the
  // source block is held until then.
  bool AllocateSlots(RequestId id, int32_t num_computed_tokens, int32_t num_new_tokens,
                     const ComputedBlocks& new_computed = {});

  // Copies each pending tail (copy(source block, destination block): every layer's K/V rows) and releases its
  // source. The engine runs them after scheduling a step and before the step writes any K/V.
  void RunPendingCopies(const std::function<void(int32_t, int32_t)>& copy);
  bool has_pending_copies() const { return !pending_copies_.empty(); }

  // Caches the request's full blocks among its first `num_tokens` tokens (`tokens` = all its tokens so far).
  void CacheFullBlocks(RequestId id, std::span<const int32_t> tokens, int32_t num_tokens, uint64_t salt = 0,
                       int32_t int8_from = -1);

  // Releases all of a request's blocks (finish, cancel, preemption); its partly filled last block stays findable
  // as a tail (GetComputedBlocks) until it is handed out again. Unknown ids are ignored.
  void Free(RequestId id);

  // The request's block table (valid until its next AllocateSlots or Free); entries behind a sliding window are
  // kNoBlock.
  std::span<const int32_t> BlockTable(RequestId id) const;
  // Gives `child` references to the same blocks as `parent`'s first `num_tokens` tokens (n > 1 forks share the
  // prompt); the partly filled last block is copied into a new block for the child, returned as
  // {source block, destination block} so the runner copies its KV rows (none when num_tokens is block aligned).
  // Returns false when no block is free for that copy.
  // With state slots the child takes a slot of its own (false when none is free), returned in `state_copy` as
  // {parent's slot, child's slot}: the runner copies the parent's state into it.
  bool Fork(RequestId parent, RequestId child, int32_t num_tokens, std::vector<std::pair<int32_t, int32_t>>* copies,
            std::pair<int32_t, int32_t>* state_copy = nullptr);

  // The request's state slot (-1: none, or a model without recurrent state).
  int32_t StateSlot(RequestId id) const;
  int32_t num_state_slots() const { return state_pool_.num_slots(); }
  int32_t num_free_state_slots() const { return state_pool_.num_free(); }

  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  int32_t block_size() const { return pool_.block_size(); }
  const KVCacheStats& stats() const { return stats_; }
  const BlockPool& pool() const { return pool_; }

  // Pool invariants plus: every request's blocks are referenced, ref counts equal the number of requests holding
  // each block, and released entries (kNoBlock) form a prefix of a table.
  void CheckIntegrity() const;

 private:
  struct RequestBlocks {
    int32_t state_slot = -1;
    std::vector<int32_t> blocks;
    std::vector<BlockHash> hashes;  // of its first hashes.size() full blocks, chained
    // Its partly filled last block as of the last CacheFullBlocks: the block (-1: none), the tokens of its computed
    // slots, the key of the prefix before it and its int8 offset (Block), for Free to index it as a tail.
    int32_t tail_block = -1;
    std::vector<int32_t> tail_tokens;
    uint64_t tail_parent_key = 0;
    int32_t tail_int8_offset = 0;
  };
  // The key under which the blocks following a prefix are indexed (BlockPool::Children): the prefix's last block's
  // hash, or for the first block a key of the adapter alone.
  static uint64_t ParentKey(const std::optional<BlockHash>& parent, uint64_t salt);
  // The longest start of a block indexed under `parent_key` that holds tokens[start...] (at most max_tokens of them)
  // computed by the formulas this request would use (int8_from); sets computed->tail_*.
  void FindTail(std::span<const int32_t> tokens, int32_t start, int32_t max_tokens, uint64_t parent_key,
                int32_t int8_from, ComputedBlocks* computed) const;
  // Releases the blocks of `req` wholly before position num_computed_tokens - sliding_window + 1 (the first
  // position the next token attends to).
  void ReleaseBehindWindow(RequestBlocks& req, int32_t num_computed_tokens);

  BlockPool pool_;
  StateSlotPool state_pool_;
  int32_t sliding_window_ = 0;
  std::unordered_map<RequestId, RequestBlocks> requests_;
  std::vector<std::pair<int32_t, int32_t>> pending_copies_;  // {held source, destination}
  KVCacheStats stats_;
};

}  // namespace parallm
