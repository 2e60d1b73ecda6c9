// String helpers: id lists parse strictly; sizes print readably.
#include <gtest/gtest.h>

#include "util/strings.h"

namespace parallm {
namespace {

TEST(ParseIdList, AcceptsCommaSeparatedIds) {
  auto ids = ParseIdList("1, 2,3");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{1, 2, 3}));
}

TEST(ParseIdList, RejectsGarbage) {
  for (const char* bad : {"", "1,,2", "a", "1.5", "-3", "99999999999"}) {
    auto ids = ParseIdList(bad);
    EXPECT_FALSE(ids.ok()) << bad;
  }
}

TEST(HumanBytes, Units) {
  EXPECT_EQ(HumanBytes(512), "512 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(3.0 * 1024 * 1024 * 1024), "3.0 GiB");
}

}  // namespace
}  // namespace parallm
