// Status / Result: errors carry their message and context; values pass through.
#include <gtest/gtest.h>

#include "util/status.h"

namespace parallm {
namespace {

Result<int> Half(int v) {
  if (v % 2 != 0) return Err("{} is odd", v);
  return v / 2;
}

Result<int> Quarter(int v) {
  PARALLM_ASSIGN_OR_RETURN(int h, Half(v));
  return Half(h);
}

TEST(Status, OkAndError) {
  EXPECT_TRUE(Status::Ok().ok());
  Status e = Err("bad {}", 42);
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.message(), "bad 42");
  EXPECT_EQ(e.WithContext("file.gguf").message(), "file.gguf: bad 42");
}

TEST(Result, PropagatesErrorsAndValues) {
  EXPECT_EQ(*Quarter(8), 2);
  auto r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
}

}  // namespace
}  // namespace parallm
