// ZeroedPages: zeroes, writable, aligned to a page (2 MiB from 1 MiB up), sized up to whole pages, and owned by one
// object at a time (a move leaves the source empty).
#include "util/zeroed_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>

namespace parallm {
namespace {

TEST(ZeroedPages, ZeroedWritableAndAligned) {
  constexpr size_t kHuge = size_t{2} << 20;
  for (size_t size : {size_t{1}, size_t{4096}, size_t{5000}, kHuge / 2 - 1, kHuge / 2, 3 * kHuge + 5}) {
    ZeroedPages pages(size);
    ASSERT_TRUE(pages) << size;
    const auto* bytes = static_cast<const uint8_t*>(pages.get());
    const uintptr_t address = reinterpret_cast<uintptr_t>(bytes);
    EXPECT_EQ(address % 4096, 0u) << size;
    if (size >= kHuge / 2) {
      EXPECT_EQ(address % kHuge, 0u) << size;
    }
    EXPECT_GE(pages.size(), size);
    EXPECT_EQ(pages.size() % 4096, 0u);
    for (size_t i = 0; i < pages.size(); i += 509) ASSERT_EQ(bytes[i], 0) << size << " at " << i;
    std::memset(pages.get(), 0xAB, pages.size());
    EXPECT_EQ(bytes[pages.size() - 1], 0xAB);
  }
}

TEST(ZeroedPages, MovesOwnership) {
  ZeroedPages a(10000);
  void* p = a.get();
  ZeroedPages b(std::move(a));
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): a moved-from buffer is empty
  EXPECT_EQ(b.get(), p);
  ZeroedPages c;
  c = std::move(b);
  EXPECT_EQ(c.get(), p);
  EXPECT_EQ(c.size(), 12288u);
}

}  // namespace
}  // namespace parallm
