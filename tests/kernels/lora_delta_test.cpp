// LoRA shrink and expand against their scalar twins on ragged shapes (widths, ranks and token counts that are not
// multiples of the vector width, rows read out of order from a wider buffer) for every vector width this CPU runs,
// and batch invariance: each token's results are bit-identical alone, in a batch, and under any split of the
// rank rows or output columns into tasks.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/lora_delta.h"

namespace parallm {
namespace {

struct Case {
  int64_t in_dim, rank, out_dim, n;
};

struct Data {
  std::vector<float> a, bt, x, y;
  std::vector<int32_t> rows;
  int64_t x_stride, y_stride;
};

Data MakeData(const Case& c, std::mt19937& rng) {
  std::uniform_real_distribution<float> v(-1.0f, 1.0f);
  Data d;
  d.x_stride = c.in_dim + 3;
  d.y_stride = c.out_dim + 5;
  const int64_t total_rows = c.n + 4;  // the adapter's tokens are some of the batch's rows, out of order
  d.rows.resize(static_cast<size_t>(total_rows));
  std::iota(d.rows.begin(), d.rows.end(), 0);
  std::shuffle(d.rows.begin(), d.rows.end(), rng);
  d.rows.resize(static_cast<size_t>(c.n));
  for (auto* vec : {&d.a, &d.bt, &d.x, &d.y}) {
    const int64_t size = vec == &d.a    ? c.rank * c.in_dim
                         : vec == &d.bt ? c.rank * c.out_dim
                         : vec == &d.x  ? total_rows * d.x_stride
                                        : total_rows * d.y_stride;
    vec->resize(static_cast<size_t>(size));
    for (float& f : *vec) f = v(rng);
  }
  return d;
}

LoraShrinkArgs ShrinkArgs(const Case& c, Data& d, const int32_t* rows, int64_t n, float* u) {
  return LoraShrinkArgs{d.a.data(), c.in_dim, d.x.data(), d.x_stride, rows, n, u, c.rank};
}

LoraExpandArgs ExpandArgs(const Case& c, const Data& d, const int32_t* rows, int64_t n, const float* u, float* y) {
  return LoraExpandArgs{d.bt.data(), c.rank, c.out_dim, u, c.rank, rows, n, 0.75f, y, d.y_stride};
}

const Case kCases[] = {{1, 1, 1, 1},     {7, 3, 5, 2},     {16, 16, 16, 4},  {17, 8, 37, 5},
                       {33, 5, 100, 9},  {100, 16, 129, 8}, {896, 16, 128, 3}, {130, 64, 70, 7}};

std::vector<int> Lanes() {
  std::vector<int> out;
  for (int lanes : {16, 8, 4})
    if (SetLoraKernelLanes(lanes)) out.push_back(lanes);
  SetLoraKernelLanes(0);
  return out;
}

TEST(LoraDelta, MatchesTheScalarTwinsOnRaggedShapes) {
  std::mt19937 rng(7);
  for (int lanes : Lanes()) {
    ASSERT_TRUE(SetLoraKernelLanes(lanes));
    for (const Case& c : kCases) {
      Data d = MakeData(c, rng);
      std::vector<float> u_want(static_cast<size_t>(c.n * c.rank)), u_got = u_want;
      ref::LoraShrink(ShrinkArgs(c, d, d.rows.data(), c.n, u_want.data()), 0, c.rank);
      LoraShrink(ShrinkArgs(c, d, d.rows.data(), c.n, u_got.data()), 0, c.rank);
      for (size_t i = 0; i < u_want.size(); ++i)
        ASSERT_NEAR(u_got[i], u_want[i], 1e-5f * static_cast<float>(c.in_dim)) << lanes << " lanes, in " << c.in_dim;
      std::vector<float> y_want = d.y, y_got = d.y;
      ref::LoraExpand(ExpandArgs(c, d, d.rows.data(), c.n, u_want.data(), y_want.data()), 0, c.out_dim);
      LoraExpand(ExpandArgs(c, d, d.rows.data(), c.n, u_want.data(), y_got.data()), 0, c.out_dim);
      int changed = 0;
      for (size_t i = 0; i < y_want.size(); ++i) {
        ASSERT_NEAR(y_got[i], y_want[i], 1e-5f * static_cast<float>(c.rank) * static_cast<float>(c.in_dim))
            << lanes << " lanes, out " << c.out_dim << " rank " << c.rank << " at " << i;
        changed += y_want[i] != d.y[i] ? 1 : 0;
      }
      EXPECT_GE(changed, c.n * c.out_dim / 2);  // the rows of the adapter's tokens moved, the others did not
      EXPECT_LE(changed, c.n * c.out_dim);
    }
  }
  SetLoraKernelLanes(0);
}

TEST(LoraDelta, EachTokenIsBitIdenticalAloneInABatchAndUnderAnySplit) {
  std::mt19937 rng(11);
  for (int lanes : Lanes()) {
    ASSERT_TRUE(SetLoraKernelLanes(lanes));
    for (const Case& c : kCases) {
      Data d = MakeData(c, rng);
      // The whole batch at once.
      std::vector<float> u_all(static_cast<size_t>(c.n * c.rank)), y_all = d.y;
      LoraShrink(ShrinkArgs(c, d, d.rows.data(), c.n, u_all.data()), 0, c.rank);
      LoraExpand(ExpandArgs(c, d, d.rows.data(), c.n, u_all.data(), y_all.data()), 0, c.out_dim);
      // Each token alone, its rank rows and output columns split at random points into tasks.
      std::vector<float> y_each = d.y;
      for (int64_t k = 0; k < c.n; ++k) {
        std::vector<float> u(static_cast<size_t>(c.rank));
        int64_t j = 0;
        while (j < c.rank) {
          const int64_t j1 = std::min<int64_t>(c.rank, j + 1 + static_cast<int64_t>(rng() % 5));
          LoraShrink(ShrinkArgs(c, d, &d.rows[static_cast<size_t>(k)], 1, u.data()), j, j1);
          j = j1;
        }
        for (int64_t r = 0; r < c.rank; ++r)
          ASSERT_EQ(u[static_cast<size_t>(r)], u_all[static_cast<size_t>(k * c.rank + r)]) << lanes << " lanes";
        int64_t o = 0;
        while (o < c.out_dim) {
          const int64_t o1 = std::min<int64_t>(c.out_dim, o + 1 + static_cast<int64_t>(rng() % 40));
          LoraExpand(ExpandArgs(c, d, &d.rows[static_cast<size_t>(k)], 1, u.data(), y_each.data()), o, o1);
          o = o1;
        }
      }
      ASSERT_EQ(y_each, y_all) << lanes << " lanes, in " << c.in_dim << " rank " << c.rank << " out " << c.out_dim;
    }
  }
  SetLoraKernelLanes(0);
}

}  // namespace
}  // namespace parallm
