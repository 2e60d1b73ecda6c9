// ThreadPool: every task runs exactly once, loops run back to back, and a pool of one runs inline; SplitRange and
// CountTasks cut loops evenly.
#include <algorithm>
#include <atomic>
#include <vector>

#include <gtest/gtest.h>

#include "util/thread_pool.h"

namespace parallm {
namespace {

TEST(ThreadPool, RunsEveryTaskOnce) {
  ThreadPool pool(2);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::atomic<int>> hits(97);
    pool.ParallelFor(97, [&](int64_t task, int thread) {
      ASSERT_GE(thread, 0);
      ASSERT_LT(thread, 2);
      hits[static_cast<size_t>(task)]++;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.num_threads(), 1);
  int sum = 0;
  pool.ParallelFor(10, [&](int64_t task, int) { sum += static_cast<int>(task); });
  EXPECT_EQ(sum, 45);
}

TEST(SplitRange, CoversEvenly) {
  int64_t covered = 0;
  for (int p = 0; p < 3; ++p) {
    auto [b, e] = SplitRange(10, 3, p);
    EXPECT_EQ(b, covered);
    covered = e;
  }
  EXPECT_EQ(covered, 10);
}

TEST(CountTasks, OneMatrixTakesTheTargetInEqualTasks) {
  // The gated MLP's 304 row groups in pairs (152 units) over 2 threads: 16 tasks of 9 or 10 pairs, not 15 and a part.
  TaskCut cut{152, 152 * 64};
  CountTasks(std::span<TaskCut>(&cut, 1), 16, 2);
  EXPECT_EQ(cut.n, 16);
  int64_t smallest = cut.units, largest = 0, covered = 0;
  for (int64_t t = 0; t < cut.n; ++t) {
    auto [b, e] = SplitRange(cut.units, cut.n, t);
    EXPECT_EQ(b, covered);
    covered = e;
    smallest = std::min(smallest, e - b);
    largest = std::max(largest, e - b);
  }
  EXPECT_EQ(covered, cut.units);
  EXPECT_LE(largest - smallest, 1);
}

TEST(CountTasks, SharesFollowTheWorkAndTheCountSuitsTheThreads) {
  // q, k and v (28, 4 and 4 pairs) and an empty product: shares by work, every product with work gets a task, the
  // count is a multiple of the threads, and no product gets more tasks than units.
  for (int threads : {2, 3, 4}) {
    std::vector<TaskCut> parts{{28, 28 * 64}, {4, 4 * 64}, {0, 0}, {4, 4 * 64}};
    CountTasks(parts, threads * 8, threads);
    EXPECT_EQ(parts[2].n, 0);
    int64_t total = 0;
    for (const TaskCut& p : parts) {
      if (p.work > 0) {
        EXPECT_GE(p.n, 1);
      }
      EXPECT_LE(p.n, p.units);
      total += p.n;
    }
    EXPECT_EQ(total % threads, 0) << threads << " threads";
    EXPECT_GT(parts[0].n, parts[1].n);
  }
  // Fewer units than tasks asked for: one task a unit, whatever the count.
  std::vector<TaskCut> small{{3, 3}};
  CountTasks(small, 16, 2);
  EXPECT_EQ(small[0].n, 3);
  // One thread: the target alone.
  std::vector<TaskCut> one{{100, 100}, {50, 50}};
  CountTasks(one, 1, 1);
  EXPECT_EQ(one[0].n, 1);
  EXPECT_EQ(one[1].n, 1);
}

}  // namespace
}  // namespace parallm
