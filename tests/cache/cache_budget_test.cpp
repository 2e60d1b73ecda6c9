// The split of --kv-cache-gb between a hybrid model's state slots and KV blocks: max_num_seqs slots when they fit in
// half the budget, as many as fit in half otherwise (at least one beside one block), the rest blocks; no slot when
// one cannot fit beside a block; every byte KV for models without state.
#include <gtest/gtest.h>

#include "cache/cache_budget.h"

namespace parallm {
namespace {

TEST(CacheBudget, SlotsFirstAtMostHalfTheRestBlocks) {
  // 64 slots of 100 bytes fit in half of 100,000: the rest, 93,600, is 93 blocks of 1,000.
  CacheBudget b = SplitCacheBudget(100000, 100, 1000, 64);
  EXPECT_EQ(b.state_slots, 64);
  EXPECT_EQ(b.kv_blocks, 93);
  EXPECT_FALSE(b.slots_capped);
  // 64 slots of 10,000 do not: half of 100,000 holds 5; the other 50,000 is 50 blocks.
  b = SplitCacheBudget(100000, 10000, 1000, 64);
  EXPECT_EQ(b.state_slots, 5);
  EXPECT_EQ(b.kv_blocks, 50);
  EXPECT_TRUE(b.slots_capped);
  EXPECT_NE(DescribeCacheBudget(b, 100000, 10000, 1000, 64).find("of --max-num-seqs 64"), std::string::npos);
  // One slot does not fit in half but fits beside one block: one slot, the rest blocks.
  b = SplitCacheBudget(5000, 3000, 1000, 64);
  EXPECT_EQ(b.state_slots, 1);
  EXPECT_EQ(b.kv_blocks, 2);
  // Not even one slot beside one block: nothing can run (the engine refuses requests, naming the state's size).
  b = SplitCacheBudget(3500, 3000, 1000, 64);
  EXPECT_EQ(b.state_slots, 0);
  EXPECT_EQ(b.kv_blocks, 0);
  EXPECT_NE(DescribeCacheBudget(b, 3500, 3000, 1000, 64).find("cannot hold one request's recurrent state"),
            std::string::npos);
  // An explicit slot count is honoured as far as it fits beside one block.
  b = SplitCacheBudget(100000, 10000, 1000, 64, 8);
  EXPECT_EQ(b.state_slots, 8);
  EXPECT_EQ(b.kv_blocks, 20);
  b = SplitCacheBudget(100000, 10000, 1000, 64, 12);
  EXPECT_EQ(b.state_slots, 9);
  EXPECT_TRUE(b.slots_capped);
  // No state: every byte is KV.
  b = SplitCacheBudget(100000, 0, 1000, 64);
  EXPECT_EQ(b.state_slots, 0);
  EXPECT_EQ(b.kv_blocks, 100);
}

}  // namespace
}  // namespace parallm
