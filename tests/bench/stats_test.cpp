// Percentiles and summaries match numpy's (values computed with numpy.percentile / mean / std).
#include "bench/stats.h"

#include <gtest/gtest.h>

namespace parallm::bench {
namespace {

TEST(BenchStats, PercentileInterpolatesLikeNumpy) {
  const std::vector<double> v = {4, 1, 3, 2};  // sorted 1 2 3 4
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);   // np.percentile([1,2,3,4], 50)
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 3.7);   // index 2.7
  EXPECT_NEAR(Percentile(v, 99), 3.97, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile(std::vector<double>{7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile(std::vector<double>{}, 50), 0);
}

TEST(BenchStats, SummaryOfASample) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);  // 1..100
  const Summary s = Summarize(v);
  EXPECT_EQ(s.count, 100u);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.median, 50.5);
  EXPECT_DOUBLE_EQ(s.p50, s.median);
  EXPECT_NEAR(s.p90, 90.1, 1e-9);    // np.percentile(range(1, 101), 90)
  EXPECT_NEAR(s.p99, 99.01, 1e-9);
  EXPECT_NEAR(s.stddev, 28.86607004772212, 1e-9);  // np.std, ddof=0
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 100);
}

TEST(BenchStats, EmptySampleIsAllZeros) {
  const Summary s = Summarize(std::vector<double>{});
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.mean, 0);
  EXPECT_EQ(s.p99, 0);
}

TEST(BenchStats, MillisecondFieldsUseVllmNames) {
  boost::json::object o;
  AddMillisecondFields(o, "ttft", Summarize(std::vector<double>{0.1, 0.2, 0.3}));
  EXPECT_DOUBLE_EQ(o.at("mean_ttft_ms").as_double(), 200);
  EXPECT_DOUBLE_EQ(o.at("median_ttft_ms").as_double(), 200);
  EXPECT_DOUBLE_EQ(o.at("p50_ttft_ms").as_double(), 200);
  EXPECT_NEAR(o.at("p90_ttft_ms").as_double(), 280, 1e-9);
  EXPECT_NEAR(o.at("p99_ttft_ms").as_double(), 298, 1e-9);
  EXPECT_TRUE(o.contains("std_ttft_ms"));
  EXPECT_EQ(o.size(), 6u);
}

}  // namespace
}  // namespace parallm::bench
