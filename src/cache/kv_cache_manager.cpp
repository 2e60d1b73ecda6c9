// KVCacheManager: per-request block tables over the BlockPool: prefix lookup, growth, caching, forks, frees.
#include "cache/kv_cache_manager.h"

#include <algorithm>
#include <string>

#include "util/check.h"

namespace parallm {

namespace {
int32_t CeilDiv(int32_t a, int32_t b) { return (a + b - 1) / b; }
}  // namespace

KVCacheManager::KVCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching,
                               int32_t sliding_window, int32_t num_state_slots)
    : pool_(num_blocks, block_size, enable_prefix_caching), state_pool_(num_state_slots), sliding_window_(sliding_window) {}

int32_t KVCacheManager::StateSlot(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? -1 : it->second.state_slot;
}

void KVCacheManager::ReleaseBehindWindow(RequestBlocks& req, int32_t num_computed_tokens) {
  if (sliding_window_ <= 0) return;
  // The next token (position num_computed_tokens) attends to positions > num_computed_tokens - window; later
  // tokens to fewer still. Blocks ending before that are never read again.
  const int32_t first_needed = num_computed_tokens - sliding_window_ + 1;
  if (first_needed <= 0) return;
  const int32_t n = std::min(first_needed / pool_.block_size(), static_cast<int32_t>(req.blocks.size()));
  std::vector<int32_t> released;
  for (int32_t i = 0; i < n; ++i) {
    int32_t& b = req.blocks[static_cast<size_t>(i)];
    if (b == kNoBlock) continue;
    released.push_back(b);
    b = kNoBlock;
  }
  // Still cached (hash kept) in the free queue: another request with the same prefix can find them until evicted.
  pool_.Free(released);
  stats_.blocks_slid_out += static_cast<int64_t>(released.size());
}

namespace {

// Block i's first slot computed by the int8 formula (Block::int8_offset): bs for a block wholly before int8_from, 0
// with one formula for all (int8_from < 0).
int32_t Int8Offset(int32_t i, int32_t bs, int32_t int8_from) {
  return int8_from < 0 ? 0 : std::clamp(int8_from - i * bs, 0, bs);
}

// Block i's hash mark (GetComputedBlocks' int8_from): 0 for a block wholly before int8_from (or with one formula for
// all), else 1 + its int8 offset (1 when the block starts at or after int8_from).
uint32_t FormulaMark(int32_t i, int32_t bs, int32_t int8_from) {
  const int32_t offset = Int8Offset(i, bs, int8_from);
  return int8_from < 0 || offset == bs ? 0 : static_cast<uint32_t>(1 + offset);
}

// The hash of block i's parent among a chain's hashes (none for the first block).
std::optional<BlockHash> ParentOf(const std::vector<BlockHash>& hashes, int32_t i) {
  if (i == 0) return std::nullopt;
  return hashes[static_cast<size_t>(i - 1)];
}

}  // namespace

uint64_t KVCacheManager::ParentKey(const std::optional<BlockHash>& parent, uint64_t salt) {
  return parent ? parent->value : HashBlockTokens(std::nullopt, {}, salt).value;
}

void KVCacheManager::FindTail(std::span<const int32_t> tokens, int32_t start, int32_t max_tokens, uint64_t parent_key,
                              int32_t int8_from, ComputedBlocks* computed) const {
  const int32_t bs = pool_.block_size();
  const int32_t offset = Int8Offset(start / bs, bs, int8_from);
  for (int32_t id : pool_.Children(parent_key, tokens[static_cast<size_t>(start)])) {
    const Block& b = pool_.block(id);
    const int32_t n = std::min<int32_t>(max_tokens, static_cast<int32_t>(b.tokens.size()));
    int32_t same = 0;
    while (same < n && b.tokens[static_cast<size_t>(same)] == tokens[static_cast<size_t>(start + same)]) ++same;
    // Slots before both offsets took the bf16 formula in both requests, slots from both on the int8 one.
    if (b.int8_offset != offset) same = std::min({same, b.int8_offset, offset});
    if (same > computed->tail_tokens) {
      computed->tail_block = id;
      computed->tail_tokens = same;
    }
  }
}

ComputedBlocks KVCacheManager::GetComputedBlocks(std::span<const int32_t> tokens, uint64_t salt, int32_t int8_from) {
  const int32_t bs = pool_.block_size();
  const int32_t num_tokens = static_cast<int32_t>(tokens.size());
  const int32_t num_full = num_tokens / bs;
  ++stats_.queries;
  stats_.query_tokens += num_tokens;

  ComputedBlocks computed;
  std::vector<BlockHash> hashes;  // of the blocks found
  if (pool_.prefix_caching()) {
    for (int32_t i = 0; i < num_full; ++i) {
      std::span<const int32_t> block_tokens = tokens.subspan(static_cast<size_t>(i * bs), static_cast<size_t>(bs));
      BlockHash hash = HashBlockTokens(ParentOf(hashes, i), block_tokens, salt, FormulaMark(i, bs, int8_from));
      std::optional<int32_t> id = pool_.Lookup(hash, block_tokens);
      if (!id) break;
      computed.block_ids.push_back(*id);
      hashes.push_back(hash);
    }
  }
  const int32_t num_hit = static_cast<int32_t>(computed.block_ids.size());
  // A prompt with no full block has nothing to find: a miss.
  if (num_hit > 0 && num_hit == num_full) {
    ++stats_.hits;
  } else if (num_hit > 0) {
    ++stats_.partial_hits;
  } else {
    ++stats_.misses;
  }
  // The last prompt token must be computed to produce logits: a wholly cached prompt gives its last block back, to
  // be found again as a tail of all but that token.
  if (num_hit * bs == num_tokens && num_hit > 0) {
    computed.block_ids.pop_back();
    hashes.pop_back();
  }
  const int32_t start = static_cast<int32_t>(computed.block_ids.size()) * bs;
  const int32_t max_tail = std::min(bs - 1, num_tokens - start - 1);
  if (pool_.prefix_caching() && max_tail > 0) {
    const std::optional<BlockHash> parent = ParentOf(hashes, static_cast<int32_t>(hashes.size()));
    FindTail(tokens, start, max_tail, ParentKey(parent, salt), int8_from, &computed);
  }
  computed.num_tokens = start + computed.tail_tokens;
  stats_.hit_tokens += computed.num_tokens;
  stats_.tail_hits += computed.tail_tokens > 0 ? 1 : 0;
  return computed;
}

bool KVCacheManager::AllocateSlots(RequestId id, int32_t num_computed_tokens, int32_t num_new_tokens,
                                   const ComputedBlocks& new_computed) {
  PARALLM_CHECK_MSG(num_computed_tokens >= 0 && num_new_tokens >= 0, "negative token count");
  const int32_t bs = pool_.block_size();
  auto it = requests_.find(id);
  const int32_t num_held = it == requests_.end() ? 0 : static_cast<int32_t>(it->second.blocks.size());
  const int32_t num_shared = static_cast<int32_t>(new_computed.block_ids.size());
  PARALLM_CHECK_MSG(num_shared == 0 || num_held == 0, "new_computed blocks are only for a request's first call");
  PARALLM_CHECK_MSG(num_computed_tokens >= new_computed.num_tokens, "computed tokens exclude the cached prefix");
  // First what the window left behind, so the blocks it frees count for this step.
  if (it != requests_.end()) ReleaseBehindWindow(it->second, num_computed_tokens);

  const int32_t num_needed = CeilDiv(num_computed_tokens + num_new_tokens, bs);
  const int32_t num_fresh = std::max(0, num_needed - num_held - num_shared);
  // Touch takes unused cached blocks out of the free queue, so they count against the free blocks too (a tail's
  // source as well, held until its copy).
  const int32_t tail = new_computed.tail_block;
  PARALLM_CHECK_MSG(tail < 0 || (num_held == 0 && new_computed.tail_tokens > 0 && num_new_tokens > 0),
                    "a tail is for a request's first call, with tokens of its own to compute");
  int32_t num_revived = 0;
  for (int32_t b : new_computed.block_ids) num_revived += pool_.block(b).ref_count == 0 ? 1 : 0;
  if (tail >= 0) num_revived += pool_.block(tail).ref_count == 0 ? 1 : 0;
  if (num_fresh + num_revived > pool_.num_free_blocks()) return false;
  const bool needs_slot = state_pool_.num_slots() > 0 && it == requests_.end();
  if (needs_slot && state_pool_.num_free() == 0) return false;

  RequestBlocks& req = requests_[id];
  if (needs_slot) req.state_slot = state_pool_.Allocate();
  if (num_shared > 0) {
    for (int32_t b : new_computed.block_ids) {
      // GetComputedBlocks found them cached; nothing may evict them before this call.
      PARALLM_CHECK_MSG(pool_.block(b).hash.has_value(), "a computed block was evicted before AllocateSlots");
      req.hashes.push_back(*pool_.block(b).hash);
    }
    pool_.Touch(new_computed.block_ids);
    req.blocks = new_computed.block_ids;
    stats_.blocks_shared += num_shared;
  }
  if (tail >= 0) {
    // GetComputedBlocks found it indexed; nothing may hand it out before this call. Held first, so the allocation
    // below cannot take it.
    PARALLM_CHECK_MSG(pool_.block(tail).is_child, "a tail was handed out before AllocateSlots");
    pool_.Touch(std::span<const int32_t>(&tail, 1));
  }
  std::vector<int32_t> fresh = pool_.Allocate(num_fresh);
  req.blocks.insert(req.blocks.end(), fresh.begin(), fresh.end());
  stats_.blocks_allocated += num_fresh;
  if (tail >= 0) pending_copies_.emplace_back(tail, fresh.at(0));
  if (num_shared > 0) ReleaseBehindWindow(req, num_computed_tokens);
  return true;
}

void KVCacheManager::RunPendingCopies(const std::function<void(int32_t, int32_t)>& copy) {
  for (const auto& [src, dst] : pending_copies_) {
    copy(src, dst);
    pool_.Free(std::span<const int32_t>(&src, 1));
  }
  pending_copies_.clear();
}

void KVCacheManager::CacheFullBlocks(RequestId id, std::span<const int32_t> tokens, int32_t num_tokens, uint64_t salt,
                                     int32_t int8_from) {
  if (!pool_.prefix_caching()) return;
  auto it = requests_.find(id);
  PARALLM_CHECK_MSG(it != requests_.end(), "CacheFullBlocks for an unknown request");
  PARALLM_CHECK_MSG(num_tokens >= 0 && num_tokens <= static_cast<int32_t>(tokens.size()), "num_tokens out of range");
  RequestBlocks& req = it->second;
  const int32_t bs = pool_.block_size();
  const int32_t num_full = std::min(num_tokens / bs, static_cast<int32_t>(req.blocks.size()));
  for (int32_t i = static_cast<int32_t>(req.hashes.size()); i < num_full; ++i) {
    std::span<const int32_t> block_tokens = tokens.subspan(static_cast<size_t>(i * bs), static_cast<size_t>(bs));
    const std::optional<BlockHash> parent = ParentOf(req.hashes, i);
    BlockHash hash = HashBlockTokens(parent, block_tokens, salt, FormulaMark(i, bs, int8_from));
    // A released block was cached before it fell behind the window; only its hash is still needed (the chain).
    if (req.blocks[static_cast<size_t>(i)] != kNoBlock)
      pool_.Cache(req.blocks[static_cast<size_t>(i)], hash, block_tokens, ParentKey(parent, salt),
                  Int8Offset(i, bs, int8_from));
    req.hashes.push_back(hash);
  }
  // The partly filled block after them, for Free to leave findable.
  req.tail_block = -1;
  req.tail_tokens.clear();
  const int32_t tail_start = num_full * bs;
  if (num_tokens > tail_start && num_full == static_cast<int32_t>(req.hashes.size()) &&
      num_full < static_cast<int32_t>(req.blocks.size()) && req.blocks[static_cast<size_t>(num_full)] != kNoBlock) {
    req.tail_block = req.blocks[static_cast<size_t>(num_full)];
    req.tail_tokens.assign(tokens.begin() + tail_start, tokens.begin() + num_tokens);
    req.tail_parent_key = ParentKey(ParentOf(req.hashes, num_full), salt);
    req.tail_int8_offset = Int8Offset(num_full, bs, int8_from);
  }
}

void KVCacheManager::Free(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  RequestBlocks& req = it->second;
  std::vector<int32_t>& blocks = req.blocks;
  std::erase(blocks, kNoBlock);
  // A copy into its blocks that has not run yet never will: its source is let go.
  std::erase_if(pending_copies_, [&](const std::pair<int32_t, int32_t>& c) {
    if (std::find(blocks.begin(), blocks.end(), c.second) == blocks.end()) return false;
    pool_.Free(std::span<const int32_t>(&c.first, 1));
    return true;
  });
  // Tail first: the request's last blocks are the least likely to be shared, so they are evicted first.
  std::reverse(blocks.begin(), blocks.end());
  pool_.Free(blocks);
  // Its partly filled last block keeps its computed slots until handed out again: a later prompt that goes on the
  // same way copies them instead of computing them.
  if (req.tail_block >= 0) pool_.CacheTail(req.tail_block, req.tail_parent_key, req.tail_tokens, req.tail_int8_offset);
  if (req.state_slot >= 0) state_pool_.Free(req.state_slot);
  requests_.erase(it);
}

std::span<const int32_t> KVCacheManager::BlockTable(RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end()) return {};
  return it->second.blocks;
}

bool KVCacheManager::Fork(RequestId parent, RequestId child, int32_t num_tokens,
                          std::vector<std::pair<int32_t, int32_t>>* copies, std::pair<int32_t, int32_t>* state_copy) {
  auto it = requests_.find(parent);
  PARALLM_CHECK_MSG(it != requests_.end(), "Fork of an unknown request");
  PARALLM_CHECK_MSG(!requests_.contains(child), "Fork into an existing request");
  const int32_t bs = pool_.block_size();
  const RequestBlocks& from = it->second;
  PARALLM_CHECK_MSG(num_tokens >= 0 && CeilDiv(num_tokens, bs) <= static_cast<int32_t>(from.blocks.size()),
                    "Fork beyond the parent's blocks");
  const int32_t num_full = num_tokens / bs;
  const bool partial = num_tokens % bs != 0;
  if (partial && pool_.num_free_blocks() == 0) return false;
  if (state_pool_.num_slots() > 0 && state_pool_.num_free() == 0) return false;

  RequestBlocks to;
  if (state_pool_.num_slots() > 0) {
    to.state_slot = state_pool_.Allocate();
    if (state_copy != nullptr) *state_copy = {from.state_slot, to.state_slot};
  }
  to.blocks.assign(from.blocks.begin(), from.blocks.begin() + num_full);
  to.hashes.assign(from.hashes.begin(), from.hashes.begin() + std::min<size_t>(from.hashes.size(), num_full));
  std::vector<int32_t> held = to.blocks;
  std::erase(held, kNoBlock);  // released behind the window: the child does not need them either
  pool_.Touch(held);
  stats_.blocks_shared += static_cast<int64_t>(held.size());
  if (partial) {
    int32_t fresh = pool_.Allocate(1)[0];
    to.blocks.push_back(fresh);
    ++stats_.blocks_allocated;
    if (copies != nullptr) copies->emplace_back(from.blocks[static_cast<size_t>(num_full)], fresh);
  }
  requests_.emplace(child, std::move(to));
  return true;
}

void KVCacheManager::CheckIntegrity() const {
  pool_.CheckIntegrity();
  state_pool_.CheckIntegrity();
  std::vector<int32_t> refs(static_cast<size_t>(pool_.num_blocks()), 0);
  std::vector<char> slot_held(static_cast<size_t>(state_pool_.num_slots()), 0);
  int32_t slots_held = 0;
  for (const auto& [id, req] : requests_) {
    const std::string where = "request " + std::to_string(id);
    // With state slots every request holds exactly one, and no two requests the same.
    if (state_pool_.num_slots() > 0) {
      PARALLM_CHECK_MSG(req.state_slot >= 0 && req.state_slot < state_pool_.num_slots(), (where + ": no state slot").c_str());
      PARALLM_CHECK_MSG(!slot_held[static_cast<size_t>(req.state_slot)], (where + ": a state slot held twice").c_str());
      slot_held[static_cast<size_t>(req.state_slot)] = 1;
      ++slots_held;
    } else {
      PARALLM_CHECK_MSG(req.state_slot == -1, where.c_str());
    }
    PARALLM_CHECK_MSG(req.hashes.size() <= req.blocks.size(), where.c_str());
    bool released_prefix = true;
    for (size_t i = 0; i < req.blocks.size(); ++i) {
      int32_t b = req.blocks[i];
      if (b == kNoBlock) {
        PARALLM_CHECK_MSG(released_prefix && sliding_window_ > 0, (where + ": a released block after a held one").c_str());
        continue;
      }
      released_prefix = false;
      PARALLM_CHECK_MSG(b >= 0 && b < pool_.num_blocks(), where.c_str());
      PARALLM_CHECK_MSG(++refs[static_cast<size_t>(b)] <= pool_.block(b).ref_count, where.c_str());
      // A block cached under a hash holds the same content for every request that references it.
      if (i < req.hashes.size() && pool_.block(b).hash) {
        PARALLM_CHECK_MSG(*pool_.block(b).hash == req.hashes[i], where.c_str());
      }
    }
    // A request holds a block at most once (its blocks are distinct).
    std::vector<int32_t> sorted = req.blocks;
    std::erase(sorted, kNoBlock);
    std::sort(sorted.begin(), sorted.end());
    PARALLM_CHECK_MSG(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), where.c_str());
  }
  PARALLM_CHECK_MSG(slots_held + state_pool_.num_free() == state_pool_.num_slots(),
                    "state slots held and free do not add up to the pool");
  // A pending copy holds its source (an indexed block) and writes into a block its request holds.
  for (const auto& [src, dst] : pending_copies_) {
    PARALLM_CHECK_MSG(pool_.block(src).is_child, "a pending copy's source is no longer indexed");
    PARALLM_CHECK_MSG(refs[static_cast<size_t>(dst)] > 0, "a pending copy writes into a block no request holds");
    ++refs[static_cast<size_t>(src)];
  }
  for (int32_t b = 0; b < pool_.num_blocks(); ++b) {
    PARALLM_CHECK_MSG(refs[static_cast<size_t>(b)] == pool_.block(b).ref_count,
                      ("block " + std::to_string(b) + ": ref count differs from the requests holding it").c_str());
  }
}

}  // namespace parallm
