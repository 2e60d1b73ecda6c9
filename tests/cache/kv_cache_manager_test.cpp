// Tests of KVCacheManager on small pools: prefix hits with exact block ids and stats, shared system prompts,
// all-or-nothing allocation, forks and frees, blocks released behind a sliding window.
#include "cache/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace parallm {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kBlockSize = 4;

std::vector<int32_t> Range(int32_t first, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Ids Table(const KVCacheManager& m, RequestId id) {
  std::span<const int32_t> t = m.BlockTable(id);
  return Ids(t.begin(), t.end());
}

using Copies = std::vector<std::pair<int32_t, int32_t>>;

// Runs the pending tail copies as the engine does, returning them.
Copies RunCopies(KVCacheManager& m) {
  Copies done;
  m.RunPendingCopies([&](int32_t src, int32_t dst) { done.emplace_back(src, dst); });
  m.CheckIntegrity();
  return done;
}

// What the scheduler and the engine do for a new request: look up its prefix, allocate the rest, copy a tail,
// cache its full blocks.
bool Admit(KVCacheManager& m, RequestId id, const std::vector<int32_t>& prompt) {
  ComputedBlocks cb = m.GetComputedBlocks(prompt);
  const int32_t n = static_cast<int32_t>(prompt.size());
  if (!m.AllocateSlots(id, cb.num_tokens, n - cb.num_tokens, cb)) return false;
  RunCopies(m);
  m.CacheFullBlocks(id, prompt, n);
  m.CheckIntegrity();
  return true;
}

TEST(KVCacheManager, PrefixCacheScenario) {
  KVCacheManager m(16, kBlockSize, true);
  const std::vector<int32_t> a = Range(1, 12);  // 3 full blocks
  const std::vector<int32_t> b = Range(100, 12);
  const std::vector<int32_t> c = Concat(Range(1, 8), Range(200, 4));  // A's first 2 blocks, then its own

  // A: miss.
  ComputedBlocks cb = m.GetComputedBlocks(a);
  EXPECT_TRUE(cb.block_ids.empty());
  EXPECT_EQ(cb.num_tokens, 0);
  ASSERT_TRUE(m.AllocateSlots(1, 0, 12, cb));
  m.CacheFullBlocks(1, a, 12);
  m.CheckIntegrity();
  EXPECT_EQ(Table(m, 1), (Ids{0, 1, 2}));
  EXPECT_EQ(m.pool().num_cached_blocks(), 3);

  // A again: hit. The last token must run to yield logits: its block is given back and found again as a tail of all
  // but that token, copied into a fresh block (block 2 is held until the copy has run).
  cb = m.GetComputedBlocks(a);
  EXPECT_EQ(cb.block_ids, (Ids{0, 1}));
  EXPECT_EQ(cb.tail_block, 2);
  EXPECT_EQ(cb.tail_tokens, 3);
  EXPECT_EQ(cb.num_tokens, 11);
  ASSERT_TRUE(m.AllocateSlots(2, 11, 1, cb));
  m.CheckIntegrity();
  EXPECT_EQ(m.pool().block(2).ref_count, 2);
  EXPECT_EQ(RunCopies(m), (Copies{{2, 3}}));
  EXPECT_EQ(m.pool().block(2).ref_count, 1);
  m.CacheFullBlocks(2, a, 12);
  m.CheckIntegrity();
  EXPECT_EQ(Table(m, 2), (Ids{0, 1, 3}));
  EXPECT_EQ(m.pool().block(0).ref_count, 2);
  EXPECT_EQ(m.pool().block(1).ref_count, 2);
  EXPECT_FALSE(m.pool().block(3).hash.has_value());  // block 2 already caches that content
  EXPECT_EQ(m.pool().num_cached_blocks(), 3);

  // B: miss.
  ASSERT_TRUE(Admit(m, 3, b));
  EXPECT_EQ(Table(m, 3), (Ids{4, 5, 6}));

  // C: partial hit on A's first 2 blocks.
  cb = m.GetComputedBlocks(c);
  EXPECT_EQ(cb.block_ids, (Ids{0, 1}));
  EXPECT_EQ(cb.num_tokens, 8);
  ASSERT_TRUE(m.AllocateSlots(4, 8, 4, cb));
  m.CacheFullBlocks(4, c, 12);
  m.CheckIntegrity();
  EXPECT_EQ(Table(m, 4), (Ids{0, 1, 7}));
  EXPECT_EQ(m.pool().block(0).ref_count, 3);

  // A finishes; its unshared tail block goes to the free queue, still cached.
  m.Free(1);
  m.CheckIntegrity();
  EXPECT_EQ(m.pool().FreeQueueIds(), (Ids{8, 9, 10, 11, 12, 13, 14, 15, 2}));
  EXPECT_EQ(m.pool().block(0).ref_count, 2);

  // A's prompt once more: hit, its tail from the free block 2, which goes back to the queue's end after the copy.
  cb = m.GetComputedBlocks(a);
  EXPECT_EQ(cb.block_ids, (Ids{0, 1}));
  EXPECT_EQ(cb.tail_block, 2);
  ASSERT_TRUE(m.AllocateSlots(5, 11, 1, cb));
  EXPECT_EQ(RunCopies(m), (Copies{{2, 8}}));
  m.CacheFullBlocks(5, a, 12);
  m.CheckIntegrity();
  EXPECT_EQ(Table(m, 5), (Ids{0, 1, 8}));
  EXPECT_EQ(m.pool().FreeQueueIds(), (Ids{9, 10, 11, 12, 13, 14, 15, 2}));

  const KVCacheStats& s = m.stats();
  EXPECT_EQ(s.queries, 5);
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.partial_hits, 1);
  EXPECT_EQ(s.misses, 2);
  EXPECT_EQ(s.query_tokens, 60);
  EXPECT_EQ(s.hit_tokens, 11 + 8 + 11);
  EXPECT_EQ(s.tail_hits, 2);
  EXPECT_EQ(s.blocks_allocated, 9);
  EXPECT_EQ(s.blocks_shared, 6);
  EXPECT_EQ(m.num_free_blocks(), 16 - 8);  // 9 handed out, block 2 freed with A
}

TEST(KVCacheManager, UnalignedPromptReusesEveryFullBlock) {
  KVCacheManager m(16, kBlockSize, true);
  const std::vector<int32_t> a = Range(1, 13);  // 3 full blocks + 1 token
  ASSERT_TRUE(Admit(m, 1, a));
  EXPECT_EQ(Table(m, 1), (Ids{0, 1, 2, 3}));
  ComputedBlocks cb = m.GetComputedBlocks(a);
  EXPECT_EQ(cb.block_ids, (Ids{0, 1, 2}));
  EXPECT_EQ(cb.num_tokens, 12);
  ASSERT_TRUE(m.AllocateSlots(2, 12, 1, cb));
  m.CheckIntegrity();
  EXPECT_EQ(Table(m, 2), (Ids{0, 1, 2, 4}));
  EXPECT_EQ(m.stats().hits, 1);
  EXPECT_EQ(m.stats().hit_tokens, 12);
}

// With int8_from (prompts on MatMul's bf16 formula, their last tokens on the int8 one), a request's blocks from its
// int8 position on are found only by a request whose tokens there were computed the same way: a conversation's
// next turn (the earlier prompt, its answer, more) reuses the earlier prompt's blocks but not the answer's, and a
// preempted request recomputing its own tokens finds all of them.
TEST(KVCacheManager, BlocksPastTheInt8PositionAreKeyedApart) {
  KVCacheManager m(32, kBlockSize, true);
  const std::vector<int32_t> prompt = Range(1, 10), answer = Range(50, 6);  // int8 from position 9 (KVCacheManager takes any)
  const std::vector<int32_t> all = Concat(prompt, answer);                     // blocks [0,4) [4,8) [8,12) [12,16)
  ASSERT_TRUE(m.AllocateSlots(1, 0, 16));
  m.CacheFullBlocks(1, all, 16, 0, 9);
  m.CheckIntegrity();
  // The next turn: its prompt runs on bf16 through position 15 and beyond; only blocks wholly before 9 match.
  const std::vector<int32_t> next_turn = Concat(all, Range(80, 5));
  EXPECT_EQ(m.GetComputedBlocks(next_turn, 0, 20).block_ids, (Ids{0, 1}));
  // The same request recomputed after a preemption (the same int8_from): every full block but the last token's.
  EXPECT_EQ(m.GetComputedBlocks(all, 0, 9).block_ids, (Ids{0, 1, 2}));
  // One formula for all (-1): no marks, so nothing past position 8 matches the marked blocks either.
  EXPECT_EQ(m.GetComputedBlocks(next_turn).block_ids, (Ids{0, 1}));
}

// A request's partly filled last block stays findable after it ends: a prompt that goes on the same way copies its
// computed slots (at most all but the prompt's last token) instead of computing them, until the block is handed out.
TEST(KVCacheManager, TailOfAFreedRequestIsCopied) {
  KVCacheManager m(8, kBlockSize, true);
  const std::vector<int32_t> a = Range(1, 10);  // blocks [1..4] [5..8], then 9, 10 in block 2
  ASSERT_TRUE(Admit(m, 1, a));
  EXPECT_EQ(m.GetComputedBlocks(a).tail_block, -1);  // still running: its last block is being written
  m.Free(1);
  m.CheckIntegrity();
  EXPECT_TRUE(m.pool().block(2).is_child);
  EXPECT_EQ(m.pool().block(2).tokens, (Ids{9, 10}));

  // The same prompt: everything but its last token.
  ComputedBlocks cb = m.GetComputedBlocks(a);
  EXPECT_EQ(cb.block_ids, (Ids{0, 1}));
  EXPECT_EQ(cb.tail_block, 2);
  EXPECT_EQ(cb.tail_tokens, 1);
  EXPECT_EQ(cb.num_tokens, 9);
  // A longer prompt through both tokens; one that differs after the first.
  EXPECT_EQ(m.GetComputedBlocks(Concat(a, {11, 12, 13})).num_tokens, 10);
  EXPECT_EQ(m.GetComputedBlocks(Concat(Range(1, 9), {77, 78})).num_tokens, 9);
  // Another adapter never finds it.
  EXPECT_EQ(m.GetComputedBlocks(Concat(a, {11}), 5).num_tokens, 0);

  ASSERT_TRUE(Admit(m, 2, Concat(a, {11, 12, 13})));
  EXPECT_EQ(Table(m, 2), (Ids{0, 1, 3, 4}));
  EXPECT_EQ(m.stats().tail_hits, 4);
  // Handed out again (last of the free queue: 5, 6, 7, then 2), a tail is gone.
  ASSERT_TRUE(m.AllocateSlots(3, 0, 16));
  m.CheckIntegrity();
  EXPECT_FALSE(m.pool().block(2).is_child);
  // What is left is request 2's third block, full and cached: its start serves as a tail too.
  EXPECT_EQ(m.GetComputedBlocks(a).tail_block, 3);
  m.Free(2);
  ASSERT_TRUE(m.AllocateSlots(4, 0, 8));  // hands out the rest: 4, then 3
  EXPECT_EQ(m.GetComputedBlocks(a).tail_block, -1);
  m.CheckIntegrity();
}

// A prompt with no full block finds a tail too (keyed by its adapter alone), and a request cancelled before its tail
// was copied lets the source go.
TEST(KVCacheManager, ShortTailAndACopyThatNeverRan) {
  KVCacheManager m(8, kBlockSize, true);
  ASSERT_TRUE(Admit(m, 1, {5, 6, 7}));
  m.Free(1);
  ComputedBlocks cb = m.GetComputedBlocks(Ids{5, 6, 7});
  EXPECT_TRUE(cb.block_ids.empty());
  EXPECT_EQ(cb.tail_block, 0);
  EXPECT_EQ(cb.num_tokens, 2);
  ASSERT_TRUE(m.AllocateSlots(2, 2, 1, cb));
  EXPECT_TRUE(m.has_pending_copies());
  m.CheckIntegrity();
  EXPECT_EQ(m.pool().block(0).ref_count, 1);
  m.Free(2);  // cancelled before the step ran
  m.CheckIntegrity();
  EXPECT_FALSE(m.has_pending_copies());
  EXPECT_EQ(m.pool().block(0).ref_count, 0);
  EXPECT_EQ(m.num_free_blocks(), 8);
}

// Where prompts take MatMul's bf16 formula, a tail's slots are reused only where the new prompt would compute them
// with the same formula: int8 from the same slot of the block.
TEST(KVCacheManager, TailsFollowTheFormula) {
  KVCacheManager m(16, kBlockSize, true);
  const std::vector<int32_t> a = Range(1, 10);  // int8 from position 8: block 2's slots all int8
  ASSERT_TRUE(m.AllocateSlots(1, 0, 10));
  m.CacheFullBlocks(1, a, 10, 0, 8);
  m.Free(1);
  m.CheckIntegrity();
  EXPECT_EQ(m.pool().block(2).int8_offset, 0);
  EXPECT_EQ(m.GetComputedBlocks(a, 0, 8).num_tokens, 9);              // the same request again
  EXPECT_EQ(m.GetComputedBlocks(Concat(a, Range(50, 6)), 0, 12).num_tokens, 8);  // bf16 through slot 3 now
  EXPECT_EQ(m.GetComputedBlocks(Concat(a, Range(50, 6)), 0, 8).num_tokens, 10);
}

TEST(KVCacheManager, ShortPromptIsAMiss) {
  KVCacheManager m(16, kBlockSize, true);
  ComputedBlocks cb = m.GetComputedBlocks(Range(1, 3));
  EXPECT_TRUE(cb.block_ids.empty());
  EXPECT_EQ(m.stats().misses, 1);
  EXPECT_EQ(m.stats().query_tokens, 3);
}

TEST(KVCacheManager, SharedSystemPrompt) {
  KVCacheManager m(64, kBlockSize, true);
  const std::vector<int32_t> system = Range(1000, 8);  // 2 blocks
  for (RequestId id = 0; id < 10; ++id) {
    // 14 tokens: 2 shared blocks, 1 full block of its own, 2 tokens in a 4th block.
    ASSERT_TRUE(Admit(m, id, Concat(system, Range(static_cast<int32_t>(id) * 100, 6))));
  }
  EXPECT_EQ(Table(m, 0), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(Table(m, 1), (Ids{0, 1, 4, 5}));
  EXPECT_EQ(Table(m, 9), (Ids{0, 1, 20, 21}));
  EXPECT_EQ(m.pool().block(0).ref_count, 10);
  EXPECT_EQ(m.pool().block(1).ref_count, 10);
  const KVCacheStats& s = m.stats();
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.partial_hits, 9);
  EXPECT_EQ(s.hits, 0);
  EXPECT_EQ(s.blocks_allocated, 4 + 9 * 2);
  EXPECT_EQ(s.blocks_shared, 9 * 2);
  EXPECT_EQ(s.hit_tokens, 9 * 8);
  EXPECT_EQ(m.num_free_blocks(), 64 - 22);
  EXPECT_EQ(m.pool().num_cached_blocks(), 2 + 10);

  for (RequestId id = 0; id < 10; ++id) {
    m.Free(id);
    m.CheckIntegrity();
  }
  EXPECT_EQ(m.num_free_blocks(), 64);
  // The shared prefix is released last (by the last request, tail first), so it is evicted last.
  Ids queue = m.pool().FreeQueueIds();
  EXPECT_EQ(Ids(queue.end() - 4, queue.end()), (Ids{21, 20, 1, 0}));
  EXPECT_EQ(Ids(queue.begin() + 42, queue.begin() + 44), (Ids{3, 2}));
}

TEST(KVCacheManager, GrowsBlockByBlock) {
  KVCacheManager m(8, kBlockSize, true);
  ASSERT_TRUE(m.AllocateSlots(1, 0, 3));
  EXPECT_EQ(Table(m, 1), (Ids{0}));
  ASSERT_TRUE(m.AllocateSlots(1, 3, 1));
  EXPECT_EQ(Table(m, 1), (Ids{0}));
  ASSERT_TRUE(m.AllocateSlots(1, 4, 1));
  EXPECT_EQ(Table(m, 1), (Ids{0, 1}));
  ASSERT_TRUE(m.AllocateSlots(1, 5, 8));
  EXPECT_EQ(Table(m, 1), (Ids{0, 1, 2, 3}));
  m.CheckIntegrity();
  EXPECT_EQ(m.stats().blocks_allocated, 4);
  // Caching as blocks fill: only the full ones.
  std::vector<int32_t> tokens = Range(1, 13);
  m.CacheFullBlocks(1, tokens, 6);
  EXPECT_EQ(m.pool().num_cached_blocks(), 1);
  m.CacheFullBlocks(1, tokens, 13);
  EXPECT_EQ(m.pool().num_cached_blocks(), 3);
  m.CheckIntegrity();
}

// Window 6, blocks of 4: the token at position p reads positions p-5..p, so a block is released once the next
// position to compute is 6 past its last slot. The table keeps kNoBlock in its place; the released blocks stay
// cached (and reusable by a request with the same prefix) in the free queue, and a fork shares only held blocks.
TEST(KVCacheManager, ReleasesBlocksBehindTheSlidingWindow) {
  KVCacheManager m(8, kBlockSize, true, /*sliding_window=*/6);
  const std::vector<int32_t> tokens = Range(1, 20);
  ASSERT_TRUE(m.AllocateSlots(1, 0, 8));  // positions 0-7: blocks 0, 1
  m.CacheFullBlocks(1, tokens, 8);
  EXPECT_EQ(Table(m, 1), (Ids{0, 1}));
  ASSERT_TRUE(m.AllocateSlots(1, 8, 1));  // the next token (8) reads 3-8: block 0 (0-3) is still needed
  EXPECT_EQ(Table(m, 1), (Ids{0, 1, 2}));
  m.CacheFullBlocks(1, tokens, 9);
  ASSERT_TRUE(m.AllocateSlots(1, 9, 1));  // position 9 reads 4-9: block 0 goes
  EXPECT_EQ(Table(m, 1), (Ids{kNoBlock, 1, 2}));
  EXPECT_EQ(m.stats().blocks_slid_out, 1);
  EXPECT_EQ(m.pool().num_cached_blocks(), 2);  // block 0 still cached, in the free queue
  m.CheckIntegrity();
  ASSERT_TRUE(m.AllocateSlots(1, 10, 4));  // a chunk 10-13 reads from 5: block 1 (4-7) stays
  EXPECT_EQ(Table(m, 1), (Ids{kNoBlock, 1, 2, 3}));
  m.CacheFullBlocks(1, tokens, 14);
  ASSERT_TRUE(m.AllocateSlots(1, 14, 1));  // position 14 reads 9-14: block 1 goes
  EXPECT_EQ(Table(m, 1), (Ids{kNoBlock, kNoBlock, 2, 3}));
  m.CheckIntegrity();
  // A fork shares the held blocks only.
  std::vector<std::pair<int32_t, int32_t>> copies;
  ASSERT_TRUE(m.Fork(1, 2, 14, &copies));
  EXPECT_EQ(Table(m, 2), (Ids{kNoBlock, kNoBlock, 2, 4}));  // 4: the free queue's head (0, 1 went to its tail)
  EXPECT_EQ(copies, (std::vector<std::pair<int32_t, int32_t>>{{3, 4}}));
  m.CheckIntegrity();
  // A new request with the same 8-token prefix still finds blocks 0 and 1 cached.
  ComputedBlocks cb = m.GetComputedBlocks(Range(1, 9));
  EXPECT_EQ(cb.block_ids, (Ids{0, 1}));
  m.Free(1);
  m.Free(2);
  m.CheckIntegrity();
  EXPECT_EQ(m.num_free_blocks(), 8);
}

TEST(KVCacheManager, FailedAllocationChangesNothing) {
  KVCacheManager m(4, kBlockSize, true);
  const std::vector<int32_t> a = Range(1, 12);
  ASSERT_TRUE(Admit(m, 1, a));
  m.Free(1);
  m.CheckIntegrity();
  EXPECT_EQ(m.pool().FreeQueueIds(), (Ids{3, 2, 1, 0}));

  // 20 tokens: 3 cached blocks (all free, revived by Touch) + 2 fresh = 5 > 4. The free count alone (4 >= 2
  // fresh) would wrongly say yes.
  const std::vector<int32_t> longer = Concat(a, Range(50, 8));
  ComputedBlocks cb = m.GetComputedBlocks(longer);
  EXPECT_EQ(cb.block_ids, (Ids{0, 1, 2}));
  const KVCacheStats before = m.stats();
  EXPECT_FALSE(m.AllocateSlots(2, cb.num_tokens, 20 - cb.num_tokens, cb));
  m.CheckIntegrity();
  EXPECT_TRUE(m.BlockTable(2).empty());
  EXPECT_EQ(m.pool().FreeQueueIds(), (Ids{3, 2, 1, 0}));
  EXPECT_EQ(m.pool().num_cached_blocks(), 3);
  EXPECT_EQ(m.stats().blocks_allocated, before.blocks_allocated);
  EXPECT_EQ(m.stats().blocks_shared, before.blocks_shared);
  for (int32_t b = 0; b < 4; ++b) EXPECT_EQ(m.pool().block(b).ref_count, 0);

  // 16 tokens fit exactly: 3 revived + 1 fresh.
  const std::vector<int32_t> fits = Concat(a, Range(50, 4));
  cb = m.GetComputedBlocks(fits);
  ASSERT_TRUE(m.AllocateSlots(2, cb.num_tokens, 16 - cb.num_tokens, cb));
  m.CheckIntegrity();
  EXPECT_EQ(Table(m, 2), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(m.num_free_blocks(), 0);

  // A running request that cannot grow keeps what it had.
  EXPECT_FALSE(m.AllocateSlots(2, 16, 1));
  m.CheckIntegrity();
  EXPECT_EQ(Table(m, 2), (Ids{0, 1, 2, 3}));
}

TEST(KVCacheManager, ForkSharesFullBlocksAndCopiesThePartialOne) {
  KVCacheManager m(6, kBlockSize, true);
  ASSERT_TRUE(m.AllocateSlots(1, 0, 10));  // blocks 0, 1 full; 2 holds 2 tokens
  EXPECT_EQ(Table(m, 1), (Ids{0, 1, 2}));

  std::vector<std::pair<int32_t, int32_t>> copies;
  ASSERT_TRUE(m.Fork(1, 2, 10, &copies));
  m.CheckIntegrity();
  EXPECT_EQ(Table(m, 2), (Ids{0, 1, 3}));
  EXPECT_EQ(copies, (std::vector<std::pair<int32_t, int32_t>>{{2, 3}}));
  EXPECT_EQ(m.pool().block(0).ref_count, 2);
  EXPECT_EQ(m.pool().block(2).ref_count, 1);

  copies.clear();
  ASSERT_TRUE(m.Fork(1, 3, 8, &copies));  // block aligned: nothing to copy
  m.CheckIntegrity();
  EXPECT_EQ(Table(m, 3), (Ids{0, 1}));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(m.pool().block(0).ref_count, 3);

  ASSERT_TRUE(m.AllocateSlots(4, 0, 8));  // takes the last 2 free blocks
  EXPECT_EQ(m.num_free_blocks(), 0);
  EXPECT_FALSE(m.Fork(1, 5, 10, &copies));
  m.CheckIntegrity();
  EXPECT_TRUE(m.BlockTable(5).empty());
  EXPECT_EQ(m.pool().block(0).ref_count, 3);
  EXPECT_EQ(m.stats().blocks_allocated, 3 + 1 + 2);
  EXPECT_EQ(m.stats().blocks_shared, 2 + 2);

  for (RequestId id : {1, 2, 3, 4}) {
    m.Free(id);
    m.CheckIntegrity();
  }
  EXPECT_EQ(m.num_free_blocks(), 6);
}

TEST(KVCacheManager, FreeOfUnknownRequestIsANoOp) {
  KVCacheManager m(8, kBlockSize, true);
  ASSERT_TRUE(m.AllocateSlots(1, 0, 5));
  const Ids queue = m.pool().FreeQueueIds();
  m.Free(99);
  m.CheckIntegrity();
  EXPECT_EQ(m.pool().FreeQueueIds(), queue);
  EXPECT_EQ(Table(m, 1), (Ids{0, 1}));
  m.Free(1);
  m.Free(1);  // twice: the second is unknown
  m.CheckIntegrity();
  EXPECT_EQ(m.num_free_blocks(), 8);
}

TEST(KVCacheManager, WithoutPrefixCachingNothingIsShared) {
  KVCacheManager m(16, kBlockSize, false);
  const std::vector<int32_t> a = Range(1, 12);
  ASSERT_TRUE(Admit(m, 1, a));
  ComputedBlocks cb = m.GetComputedBlocks(a);
  EXPECT_TRUE(cb.block_ids.empty());
  ASSERT_TRUE(m.AllocateSlots(2, 0, 12, cb));
  m.CheckIntegrity();
  EXPECT_EQ(Table(m, 2), (Ids{3, 4, 5}));
  EXPECT_EQ(m.pool().num_cached_blocks(), 0);
  EXPECT_EQ(m.stats().misses, 2);
  EXPECT_EQ(m.stats().blocks_shared, 0);
}

}  // namespace
}  // namespace parallm

namespace parallm {
namespace {

// Hybrid models: a request takes one state slot with its first blocks (lowest free id first), admission fails when
// either blocks or slots run out (changing nothing), Free returns the slot, and a fork takes a slot of its own and
// names the parent's slot to copy.
TEST(KVCacheManager, StateSlotsComeAndGoWithTheRequest) {
  KVCacheManager m(/*num_blocks=*/4, kBlockSize, /*enable_prefix_caching=*/false, /*sliding_window=*/0,
                   /*num_state_slots=*/2);
  EXPECT_EQ(m.StateSlot(1), -1);
  ASSERT_TRUE(m.AllocateSlots(1, 0, 3));
  ASSERT_TRUE(m.AllocateSlots(2, 0, 3));
  EXPECT_EQ(m.StateSlot(1), 0);
  EXPECT_EQ(m.StateSlot(2), 1);
  EXPECT_EQ(m.num_free_state_slots(), 0);
  EXPECT_FALSE(m.AllocateSlots(3, 0, 1));  // blocks are free, slots are not
  EXPECT_EQ(m.num_free_blocks(), 2);
  EXPECT_TRUE(Table(m, 3).empty());
  ASSERT_TRUE(m.AllocateSlots(1, 3, 2));   // growing keeps the slot
  EXPECT_EQ(m.StateSlot(1), 0);
  m.CheckIntegrity();
  m.Free(1);
  EXPECT_EQ(m.num_free_state_slots(), 1);
  std::vector<std::pair<int32_t, int32_t>> copies;
  std::pair<int32_t, int32_t> state_copy{-1, -1};
  ASSERT_TRUE(m.Fork(2, 4, 3, &copies, &state_copy));
  EXPECT_EQ(state_copy, (std::pair<int32_t, int32_t>{1, 0}));
  EXPECT_FALSE(m.Fork(2, 5, 3, &copies, &state_copy));  // no slot left for a second copy
  EXPECT_EQ(m.StateSlot(5), -1);
  m.CheckIntegrity();
  m.Free(2);
  m.Free(4);
  EXPECT_EQ(m.num_free_state_slots(), 2);
  EXPECT_EQ(m.num_free_blocks(), 4);
  m.CheckIntegrity();
}

}  // namespace
}  // namespace parallm
