// PagedAttention against its scalar reference twin, on ragged shapes and scattered block tables, and the
// property the engine needs: a head's result does not depend on how the heads are split.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/attention.h"

namespace parallm {
namespace {

struct Case {
  int n_heads, n_kv_heads, head_dim, block_size;
  int64_t n_ctx;
};

class PagedAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(PagedAttentionTest, MatchesReference) {
  const Case c = GetParam();
  std::mt19937 rng(42);
  std::normal_distribution<float> normal;
  const int64_t n_blocks = (c.n_ctx + c.block_size - 1) / c.block_size + 3;
  const int64_t stride = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
  std::vector<float> keys(static_cast<size_t>(n_blocks * c.block_size * stride));
  std::vector<float> values(keys.size());
  for (float& x : keys) x = normal(rng);
  for (float& x : values) x = normal(rng);
  // Blocks in a scrambled order: the table, not the storage order, defines the sequence.
  std::vector<int32_t> table;
  for (int64_t b = (c.n_ctx + c.block_size - 1) / c.block_size - 1; b >= 0; --b)
    table.push_back(static_cast<int32_t>((b * 7 + 3) % n_blocks));
  std::vector<float> q(static_cast<size_t>(c.n_heads * c.head_dim));
  for (float& x : q) x = normal(rng);
  const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  const PagedKvView kv{keys.data(), values.data(), stride, c.block_size};
  std::vector<float> scratch(static_cast<size_t>(c.n_ctx));
  std::vector<float> fast(q.size()), ref(q.size()), split(q.size());
  PagedAttention(q.data(), shape, kv, table, c.n_ctx, 0, c.n_kv_heads, scratch.data(), fast.data());
  ref::PagedAttention(q.data(), shape, kv, table, c.n_ctx, 0, c.n_kv_heads, scratch.data(), ref.data());
  for (size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(fast[i], ref[i], 1e-5f * (1 + std::abs(ref[i]))) << i;
  // One KV head at a time gives the same bits as all at once.
  for (int h = 0; h < c.n_kv_heads; ++h)
    PagedAttention(q.data(), shape, kv, table, c.n_ctx, h, h + 1, scratch.data(), split.data());
  EXPECT_EQ(split, fast);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttentionTest,
                         ::testing::Values(Case{1, 1, 8, 16, 1}, Case{8, 4, 8, 16, 37}, Case{14, 2, 64, 16, 300},
                                           Case{16, 8, 128, 16, 129}, Case{4, 2, 20, 4, 9}, Case{6, 3, 50, 5, 61}));

}  // namespace
}  // namespace parallm
