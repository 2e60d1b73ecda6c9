// The HTTP client's pieces that need no server: base-URL parsing and server-sent-event framing.
#include "bench/http_client.h"

#include <gtest/gtest.h>

namespace parallm::bench {
namespace {

TEST(BenchBaseUrl, ParsesHostPortAndPrefix) {
  auto u = ParseBaseUrl("http://127.0.0.1:8000");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "8000");
  EXPECT_EQ(u->prefix, "");
  u = ParseBaseUrl("http://example.com/proxy/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(u->prefix, "/proxy");
  u = ParseBaseUrl("http://[::1]:9000");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, "9000");
  EXPECT_FALSE(ParseBaseUrl("https://api.openai.com").ok());
  EXPECT_FALSE(ParseBaseUrl("127.0.0.1:8000").ok());
  EXPECT_FALSE(ParseBaseUrl("http://host:80x").ok());
  EXPECT_FALSE(ParseBaseUrl("http://:80").ok());
}

TEST(BenchSseParser, SplitsEventsAcrossReads) {
  SseParser p;
  EXPECT_TRUE(p.Feed("data: {\"a\"").empty());
  auto e = p.Feed(":1}\n\ndata: [DO");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], "{\"a\":1}");
  e = p.Feed("NE]\n\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], "[DONE]");
}

TEST(BenchSseParser, HandlesCrlfCommentsAndMultilineData) {
  SseParser p;
  auto e = p.Feed(": ping\r\n\r\ndata:x\r\ndata: y\r\n\r\nevent: foo\nid: 3\n\ndata: z\n\n");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0], "x\ny");
  EXPECT_EQ(e[1], "z");
}

}  // namespace
}  // namespace parallm::bench
