// Tests of FreeBlockQueue and BlockPool on tiny pools: exact block ids, exact queue order, LRU eviction,
// revival of cached free blocks, and hash collisions.
#include "cache/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace parallm {
namespace {

using Ids = std::vector<int32_t>;

TEST(FreeBlockQueue, AppendPopRemove) {
  std::vector<Block> blocks(5);
  for (int32_t i = 0; i < 5; ++i) blocks[i].id = i;
  FreeBlockQueue q;
  EXPECT_EQ(q.PopFront(), nullptr);
  for (Block& b : blocks) q.Append(&b);
  EXPECT_EQ(q.Ids(), (Ids{0, 1, 2, 3, 4}));
  EXPECT_EQ(q.size(), 5);

  q.Remove(&blocks[2]);  // middle
  EXPECT_EQ(q.Ids(), (Ids{0, 1, 3, 4}));
  EXPECT_FALSE(blocks[2].in_free_queue);
  EXPECT_EQ(blocks[2].prev_free, nullptr);
  EXPECT_EQ(blocks[2].next_free, nullptr);

  EXPECT_EQ(q.PopFront(), &blocks[0]);
  EXPECT_EQ(q.Ids(), (Ids{1, 3, 4}));
  q.Remove(&blocks[4]);  // tail
  EXPECT_EQ(q.Ids(), (Ids{1, 3}));
  q.Append(&blocks[2]);
  q.Append(&blocks[0]);
  EXPECT_EQ(q.Ids(), (Ids{1, 3, 2, 0}));
  q.Remove(&blocks[1]);  // head
  EXPECT_EQ(q.Ids(), (Ids{3, 2, 0}));
  EXPECT_EQ(q.size(), 3);

  EXPECT_EQ(q.PopFront(), &blocks[3]);
  EXPECT_EQ(q.PopFront(), &blocks[2]);
  EXPECT_EQ(q.PopFront(), &blocks[0]);
  EXPECT_EQ(q.PopFront(), nullptr);
  EXPECT_EQ(q.size(), 0);
  EXPECT_TRUE(q.Ids().empty());
  q.Append(&blocks[4]);  // an emptied queue works again
  EXPECT_EQ(q.Ids(), (Ids{4}));
}

// Token ids of block `i` of a test sequence: 4 tokens each.
std::vector<int32_t> Tokens(int32_t i) { return {10 * i, 10 * i + 1, 10 * i + 2, 10 * i + 3}; }

TEST(BlockPool, AllocatesInIdOrderAndFreesToTheBack) {
  BlockPool pool(6, 4, true);
  pool.CheckIntegrity();
  EXPECT_EQ(pool.FreeQueueIds(), (Ids{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(pool.Allocate(2), (Ids{0, 1}));
  pool.CheckIntegrity();
  EXPECT_EQ(pool.Allocate(3), (Ids{2, 3, 4}));
  pool.CheckIntegrity();
  EXPECT_EQ(pool.FreeQueueIds(), (Ids{5}));
  EXPECT_EQ(pool.num_free_blocks(), 1);
  EXPECT_EQ(pool.block(3).ref_count, 1);

  pool.Free(Ids{4, 3, 2});  // a request's blocks, last first
  pool.CheckIntegrity();
  EXPECT_EQ(pool.FreeQueueIds(), (Ids{5, 4, 3, 2}));
  pool.Free(Ids{1, 0});
  pool.CheckIntegrity();
  EXPECT_EQ(pool.FreeQueueIds(), (Ids{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(pool.Allocate(2), (Ids{5, 4}));
  pool.CheckIntegrity();
  EXPECT_EQ(pool.FreeQueueIds(), (Ids{3, 2, 1, 0}));
}

TEST(BlockPool, EvictsTheLeastRecentlyFreedCachedBlock) {
  BlockPool pool(6, 4, true);
  EXPECT_EQ(pool.Allocate(3), (Ids{0, 1, 2}));
  BlockHash h0 = HashBlockTokens(std::nullopt, Tokens(0));
  BlockHash h1 = HashBlockTokens(h0, Tokens(1));
  BlockHash h2 = HashBlockTokens(h1, Tokens(2));
  pool.Cache(0, h0, Tokens(0));
  pool.Cache(1, h1, Tokens(1));
  pool.Cache(2, h2, Tokens(2));
  pool.CheckIntegrity();
  EXPECT_EQ(pool.num_cached_blocks(), 3);
  EXPECT_EQ(pool.Lookup(h1, Tokens(1)), 1);

  pool.Free(Ids{2, 1, 0});
  pool.CheckIntegrity();
  EXPECT_EQ(pool.FreeQueueIds(), (Ids{3, 4, 5, 2, 1, 0}));
  // Freed cached blocks keep their content until reused.
  EXPECT_EQ(pool.num_cached_blocks(), 3);
  EXPECT_EQ(pool.Lookup(h2, Tokens(2)), 2);

  EXPECT_EQ(pool.Allocate(3), (Ids{3, 4, 5}));  // never-cached blocks first
  pool.CheckIntegrity();
  EXPECT_EQ(pool.num_cached_blocks(), 3);
  EXPECT_EQ(pool.Allocate(1), (Ids{2}));  // the tail block of the freed prefix goes first
  pool.CheckIntegrity();
  EXPECT_EQ(pool.num_cached_blocks(), 2);
  EXPECT_FALSE(pool.Lookup(h2, Tokens(2)).has_value());
  EXPECT_FALSE(pool.block(2).hash.has_value());
  EXPECT_TRUE(pool.block(2).tokens.empty());
  EXPECT_EQ(pool.Lookup(h0, Tokens(0)), 0);
  EXPECT_EQ(pool.Lookup(h1, Tokens(1)), 1);
  EXPECT_EQ(pool.FreeQueueIds(), (Ids{1, 0}));
}

TEST(BlockPool, TouchRevivesACachedFreeBlock) {
  BlockPool pool(6, 4, true);
  EXPECT_EQ(pool.Allocate(2), (Ids{0, 1}));
  BlockHash h0 = HashBlockTokens(std::nullopt, Tokens(0));
  pool.Cache(0, h0, Tokens(0));
  pool.Free(Ids{1, 0});
  pool.CheckIntegrity();
  EXPECT_EQ(pool.FreeQueueIds(), (Ids{2, 3, 4, 5, 1, 0}));

  std::optional<int32_t> hit = pool.Lookup(h0, Tokens(0));
  ASSERT_EQ(hit, 0);
  pool.Touch(Ids{0});
  pool.CheckIntegrity();
  EXPECT_EQ(pool.block(0).ref_count, 1);
  EXPECT_FALSE(pool.block(0).in_free_queue);
  EXPECT_EQ(pool.FreeQueueIds(), (Ids{2, 3, 4, 5, 1}));
  pool.Touch(Ids{0});  // a second request sharing it
  pool.CheckIntegrity();
  EXPECT_EQ(pool.block(0).ref_count, 2);
  EXPECT_EQ(pool.num_free_blocks(), 5);

  pool.Free(Ids{0});
  pool.CheckIntegrity();
  EXPECT_EQ(pool.FreeQueueIds(), (Ids{2, 3, 4, 5, 1}));
  pool.Free(Ids{0});
  pool.CheckIntegrity();
  EXPECT_EQ(pool.FreeQueueIds(), (Ids{2, 3, 4, 5, 1, 0}));
  EXPECT_EQ(pool.Lookup(h0, Tokens(0)), 0);  // still cached
}

TEST(BlockPool, HashCollisionIsNotAHit) {
  BlockPool pool(6, 4, true);
  EXPECT_EQ(pool.Allocate(2), (Ids{0, 1}));
  const BlockHash fake{42};
  std::vector<int32_t> a = {1, 2, 3, 4};
  std::vector<int32_t> b = {5, 6, 7, 8};
  pool.Cache(0, fake, a);
  pool.CheckIntegrity();
  EXPECT_EQ(pool.Lookup(fake, a), 0);
  EXPECT_FALSE(pool.Lookup(fake, b).has_value());
  // The colliding content is not registered: the existing mapping stays.
  pool.Cache(1, fake, b);
  pool.CheckIntegrity();
  EXPECT_FALSE(pool.block(1).hash.has_value());
  EXPECT_EQ(pool.num_cached_blocks(), 1);
  EXPECT_EQ(pool.Lookup(fake, a), 0);
  EXPECT_FALSE(pool.Lookup(fake, b).has_value());
}

TEST(BlockPool, SameContentTwiceKeepsTheFirstBlock) {
  BlockPool pool(6, 4, true);
  EXPECT_EQ(pool.Allocate(2), (Ids{0, 1}));
  BlockHash h = HashBlockTokens(std::nullopt, Tokens(0));
  pool.Cache(0, h, Tokens(0));
  pool.Cache(1, h, Tokens(0));
  pool.Cache(0, h, Tokens(0));  // re-caching the same block is a no-op
  pool.CheckIntegrity();
  EXPECT_EQ(pool.num_cached_blocks(), 1);
  EXPECT_EQ(pool.Lookup(h, Tokens(0)), 0);
  EXPECT_FALSE(pool.block(1).hash.has_value());
}

TEST(BlockPool, NoCachingWithoutPrefixCaching) {
  BlockPool pool(6, 4, false);
  EXPECT_EQ(pool.Allocate(1), (Ids{0}));
  BlockHash h = HashBlockTokens(std::nullopt, Tokens(0));
  pool.Cache(0, h, Tokens(0));
  pool.CheckIntegrity();
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  EXPECT_FALSE(pool.Lookup(h, Tokens(0)).has_value());
}

// Cached blocks and tails are indexed as children of their prefix, found by that prefix and their first token, and
// leave the index when they are handed out again.
TEST(BlockPool, ChildrenAreFoundByPrefixAndFirstTokenUntilHandedOut) {
  BlockPool pool(4, 4, true);
  EXPECT_EQ(pool.Allocate(2), (Ids{0, 1}));
  pool.Cache(0, BlockHash{5}, Ids{7, 8, 9, 10}, /*parent_key=*/42, /*int8_offset=*/4);
  pool.Free(Ids{1});
  pool.CacheTail(1, 42, Ids{7, 3}, 0);
  pool.CheckIntegrity();
  std::vector<int32_t> both = pool.Children(42, 7);
  std::sort(both.begin(), both.end());
  EXPECT_EQ(both, (Ids{0, 1}));
  EXPECT_TRUE(pool.Children(42, 8).empty());
  EXPECT_TRUE(pool.Children(43, 7).empty());
  EXPECT_EQ(pool.block(0).int8_offset, 4);
  EXPECT_EQ(pool.block(1).tokens, (Ids{7, 3}));
  // The free queue: 2, 3, then the tail.
  EXPECT_EQ(pool.Allocate(3), (Ids{2, 3, 1}));
  pool.CheckIntegrity();
  EXPECT_EQ(pool.Children(42, 7), (Ids{0}));
  EXPECT_FALSE(pool.block(1).is_child);
  EXPECT_TRUE(pool.block(1).tokens.empty());
}

TEST(BlockPoolDeathTest, CheckIntegrityCatchesBrokenRefCounts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  BlockPool pool(6, 4, true);
  pool.Allocate(1);
  pool.block(3).ref_count = 1;  // still in the free queue: inconsistent
  EXPECT_DEATH(pool.CheckIntegrity(), "invariant violated");
}

TEST(BlockPoolDeathTest, CheckIntegrityCatchesAStaleIndex) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  BlockPool pool(6, 4, true);
  pool.Allocate(1);
  pool.Cache(0, BlockHash{1}, Tokens(0));
  pool.block(0).hash = BlockHash{2};  // the index still says 1
  EXPECT_DEATH(pool.CheckIntegrity(), "invariant violated");
}

}  // namespace
}  // namespace parallm
