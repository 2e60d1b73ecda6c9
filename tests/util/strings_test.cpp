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

TEST(ToValidUtf8, KeepsValidTextAndReplacesInvalidSubparts) {
  EXPECT_EQ(ToValidUtf8("héllo 世界 🙂"), "héllo 世界 🙂");
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(ToValidUtf8("a\x80" "b"), "a" + fffd + "b");         // lone continuation byte
  EXPECT_EQ(ToValidUtf8("\xE4\xB8"), fffd);                       // truncated 3-byte sequence: one replacement
  EXPECT_EQ(ToValidUtf8("\xC0\xAF"), fffd + fffd);                // overlong: C0 is never valid
  EXPECT_EQ(ToValidUtf8("\xED\xA0\x80"), fffd + fffd + fffd);    // surrogate: ED then two stray bytes
  EXPECT_EQ(ToValidUtf8("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // above U+10FFFF
  EXPECT_EQ(ToValidUtf8(std::string("x\0y", 3)), std::string("x\0y", 3));
}

}  // namespace
}  // namespace parallm
