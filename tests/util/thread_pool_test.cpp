// ThreadPool: every task runs exactly once, loops run back to back, and a pool of one runs inline.
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

}  // namespace
}  // namespace parallm
