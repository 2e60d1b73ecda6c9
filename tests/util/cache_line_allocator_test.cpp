// Tests of CacheLineAllocator: every block a vector gets starts on a cache line, small or large (glibc's malloc
// would put a large one 16 bytes past a page start), through growth and copies.
#include "util/cache_line_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace parallm {
namespace {

bool OnALine(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % kCacheLineBytes == 0; }

TEST(CacheLineAllocator, EveryBlockStartsOnALine) {
  std::vector<std::vector<float, CacheLineAllocator<float>>> kept;  // live together, so no block is reused
  for (size_t n : {1u, 3u, 17u, 1000u, 32768u, 1u << 20}) {
    std::vector<float, CacheLineAllocator<float>> v(n, 1.0f);
    EXPECT_TRUE(OnALine(v.data())) << n;
    v.resize(3 * n + 5);  // grows into a new block
    EXPECT_TRUE(OnALine(v.data())) << n;
    EXPECT_EQ(v[n - 1], 1.0f);
    EXPECT_EQ(v[3 * n + 4], 0.0f);
    auto copy = v;
    EXPECT_TRUE(OnALine(copy.data())) << n;
    kept.push_back(std::move(copy));
  }
  std::vector<int32_t, CacheLineAllocator<int32_t>> ints(77);
  EXPECT_TRUE(OnALine(ints.data()));
}

}  // namespace
}  // namespace parallm
