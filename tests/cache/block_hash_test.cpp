// Tests of BlockHash: deterministic, chained through the parent, sensitive to every token and its order.
#include "cache/block_hash.h"

#include <gtest/gtest.h>

#include <vector>

namespace parallm {
namespace {

TEST(BlockHash, SameInputsSameHash) {
  std::vector<int32_t> a = {1, 2, 3, 4};
  EXPECT_EQ(HashBlockTokens(std::nullopt, a), HashBlockTokens(std::nullopt, a));
  EXPECT_EQ(HashBlockTokens(BlockHash{7}, a), HashBlockTokens(BlockHash{7}, a));
}

TEST(BlockHash, ChainedThroughParent) {
  std::vector<int32_t> a = {1, 2, 3, 4};
  std::vector<int32_t> b = {5, 6, 7, 8};
  BlockHash ha = HashBlockTokens(std::nullopt, a);
  BlockHash hb = HashBlockTokens(ha, b);
  // The same block after a different parent (or after none) is a different prefix.
  EXPECT_NE(hb, HashBlockTokens(std::nullopt, b));
  EXPECT_NE(hb, HashBlockTokens(HashBlockTokens(std::nullopt, b), b));
  EXPECT_NE(ha, HashBlockTokens(BlockHash{0}, a));
}

TEST(BlockHash, EveryTokenAndItsOrderMatter) {
  std::vector<int32_t> a = {1, 2, 3, 4};
  std::vector<int32_t> swapped = {2, 1, 3, 4};
  std::vector<int32_t> last = {1, 2, 3, 5};
  BlockHash h = HashBlockTokens(std::nullopt, a);
  EXPECT_NE(h, HashBlockTokens(std::nullopt, swapped));
  EXPECT_NE(h, HashBlockTokens(std::nullopt, last));
}

}  // namespace
}  // namespace parallm
