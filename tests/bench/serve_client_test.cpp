// The online benchmark's pieces that need no server: Poisson arrivals, request bodies, random and ShareGPT datasets.
#include "bench/serve_client.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace parallm::bench {
namespace {

TEST(BenchServeClient, PoissonArrivalsAreSeededAndIncreasing) {
  const auto a = ArrivalTimes(2000, 10.0, 7);
  EXPECT_EQ(a, ArrivalTimes(2000, 10.0, 7));
  EXPECT_NE(a, ArrivalTimes(2000, 10.0, 8));
  EXPECT_EQ(a[0], 0);
  for (size_t i = 1; i < a.size(); ++i) EXPECT_GE(a[i], a[i - 1]);
  // Mean gap 1/rate (0.1 s): 1999 gaps sum to about 199.9 s; exponential gaps vary (cv ~1).
  EXPECT_NEAR(a.back() / 1999, 0.1, 0.01);
  double sq = 0;
  for (size_t i = 1; i < a.size(); ++i) sq += std::pow(a[i] - a[i - 1] - 0.1, 2);
  EXPECT_NEAR(std::sqrt(sq / 1999), 0.1, 0.015);
  for (double t : ArrivalTimes(5, INFINITY, 0)) EXPECT_EQ(t, 0);
}

TEST(BenchServeClient, RequestBodies) {
  ServeOptions o;
  o.model = "m";
  ServeRequest ids{"", {5, 6, 7}, 3, 9};
  auto body = boost::json::parse(RequestBody(o, ids)).as_object();
  EXPECT_EQ(body.at("model").as_string(), "m");
  EXPECT_EQ(body.at("prompt").as_array().size(), 3u);
  EXPECT_EQ(body.at("max_tokens").as_int64(), 9);
  EXPECT_TRUE(body.at("stream").as_bool());
  EXPECT_TRUE(body.at("stream_options").at("include_usage").as_bool());
  EXPECT_TRUE(body.at("ignore_eos").as_bool());
  o.endpoint = "/v1/chat/completions";
  o.ignore_eos = false;
  ServeRequest text{"hello", {}, 1, 4};
  body = boost::json::parse(RequestBody(o, text)).as_object();
  EXPECT_EQ(body.at("messages").at(0).at("content").as_string(), "hello");
  EXPECT_EQ(body.at("max_completion_tokens").as_int64(), 4);
  EXPECT_FALSE(body.contains("ignore_eos"));
  EXPECT_FALSE(body.contains("prompt"));
}

TEST(BenchServeDataset, RandomPromptsHaveTheirLengthsAndSharedPrefix) {
  RandomDatasetOptions r;
  r.num_prompts = 20;
  r.input_len = 10;
  r.output_len = 5;
  r.prefix_len = 4;
  r.vocab = 100;
  const auto reqs = RandomDataset(r, nullptr);
  ASSERT_EQ(reqs.size(), 20u);
  for (const ServeRequest& q : reqs) {
    EXPECT_EQ(q.prompt_ids.size(), 14u);
    EXPECT_EQ(q.prompt_len, 14);
    EXPECT_EQ(q.output_len, 5);
    EXPECT_TRUE(std::equal(q.prompt_ids.begin(), q.prompt_ids.begin() + 4, reqs[0].prompt_ids.begin()));
    for (int32_t id : q.prompt_ids) EXPECT_LT(id, 100);
  }
  EXPECT_NE(reqs[0].prompt_ids, reqs[1].prompt_ids);
  r.range_ratio = 0.5;
  for (const ServeRequest& q : RandomDataset(r, nullptr)) {
    EXPECT_GE(q.prompt_len, 4 + 5);
    EXPECT_LE(q.prompt_len, 4 + 15);
    EXPECT_GE(q.output_len, 2);
    EXPECT_LE(q.output_len, 8);
  }
}

TEST(BenchServeDataset, ShareGptFiltersAsVllmAndCycles) {
  // Without a tokenizer lengths are characters / 4, rounded up: "a" x 16 is 4 tokens, "a" x 15 too, "a" x 12 is 3.
  const std::string p16(16, 'a'), p12(12, 'a'), long_prompt(1025 * 4, 'b'), reply(40, 'c'), huge_reply(1100 * 4, 'd');
  auto conv = [](const std::string& h, const std::string& g) {
    return boost::json::object{{"conversations", boost::json::array{boost::json::object{{"from", "human"}, {"value", h}},
                                                                     boost::json::object{{"from", "gpt"}, {"value", g}}}}};
  };
  boost::json::array data{conv(p16, reply),               // kept: 4 + 10 tokens
                          conv(p12, reply),               // prompt 3 tokens: dropped
                          conv(long_prompt, reply),       // prompt 1025 tokens: dropped
                          conv(p16 + p16, huge_reply),    // 8 + 1100 tokens: kept (<= 2048)
                          conv(p16 + p16 + p16, huge_reply + huge_reply)};  // 12 + 2200 tokens: dropped
  const auto path = std::filesystem::temp_directory_path() / "parallm_sharegpt_test.json";
  std::ofstream(path) << boost::json::serialize(data);
  auto got = ShareGptDataset(path.string(), {5, 0, 1}, nullptr);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got->size(), 5u);  // two valid pairs, cycled
  for (const ServeRequest& r : *got) {
    EXPECT_TRUE(r.prompt_ids.empty());
    if (r.prompt == p16) {
      EXPECT_EQ(r.prompt_len, 4);
      EXPECT_EQ(r.output_len, 10);
    } else {
      EXPECT_EQ(r.prompt, p16 + p16);
      EXPECT_EQ(r.output_len, 1100);
    }
  }
  EXPECT_EQ((*got)[0].prompt, (*got)[2].prompt);
  got = ShareGptDataset(path.string(), {2, 7, 1}, nullptr);  // --sharegpt-output-len 7
  ASSERT_TRUE(got.ok());
  for (const ServeRequest& r : *got) EXPECT_EQ(r.output_len, 7);
  std::ofstream(path) << "[{\"conversations\": []}]";
  EXPECT_FALSE(ShareGptDataset(path.string(), {2, 0, 1}, nullptr).ok());
  std::ofstream(path) << "not json";
  EXPECT_FALSE(ShareGptDataset(path.string(), {2, 0, 1}, nullptr).ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace parallm::bench
