// The SVG chart writer: nice ticks, one element per point and bar with its value, escaped text.
#include "bench/chart.h"

#include <gtest/gtest.h>

#include <regex>

namespace parallm::bench {
namespace {

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(BenchChart, NiceTicksCoverTheRangeInRoundSteps) {
  EXPECT_EQ(NiceTicks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(NiceTicks(0, 93, 5), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  const std::vector<double> small = NiceTicks(0, 0.013, 5);
  EXPECT_DOUBLE_EQ(small.front(), 0);
  EXPECT_GE(small.back(), 0.013);
  EXPECT_NEAR(small[1], 0.005, 1e-12);
  EXPECT_EQ(NiceTicks(0, 0, 5).size(), 6u);  // an empty range still gets an axis
}

TEST(BenchChart, LineChartHasEveryPointAndTheLabels) {
  LineChart c;
  c.title = "Throughput <vs> concurrency";
  c.subtitle = "synthetic:tiny · 2026-11-30";
  c.x_label = "concurrent requests";
  c.y_label = "tokens/s";
  c.log2_x = true;
  c.series = {{"generation", {1, 2, 4, 8}, {10, 19, 35, 60}}, {"decode", {1, 2, 4, 8}, {12, 23, 40, 70}}};
  const std::string svg = RenderLineChart(c);
  EXPECT_TRUE(svg.starts_with("<?xml"));
  EXPECT_EQ(Count(svg, "<circle class=\"point\""), 8u);
  EXPECT_EQ(Count(svg, "<polyline class=\"series\""), 2u);
  EXPECT_NE(svg.find("Throughput &lt;vs&gt; concurrency"), std::string::npos);
  EXPECT_EQ(svg.find("<vs>"), std::string::npos);
  EXPECT_NE(svg.find("data-series=\"decode\" data-x=\"8\" data-value=\"70\""), std::string::npos);
  EXPECT_NE(svg.find(">concurrent requests<"), std::string::npos);
  EXPECT_NE(svg.find(">tokens/s<"), std::string::npos);
  // log2 axis: ticks at 1, 2, 4, 8.
  for (const char* tick : {">1<", ">2<", ">4<", ">8<"}) EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  EXPECT_TRUE(svg.ends_with("</svg>\n"));
}

TEST(BenchChart, BarChartHasOneBarPerSeriesAndGroup) {
  BarChart c;
  c.title = "latency";
  c.y_label = "ms";
  c.series = {"mean", "median", "p99"};
  c.groups = {{"TTFT", {50, 48, 90}}, {"TPOT", {10, 9.5, 12}}};
  const std::string svg = RenderBarChart(c);
  EXPECT_EQ(Count(svg, "<rect class=\"bar\""), 6u);
  EXPECT_EQ(Count(svg, "class=\"panel\""), 2u);
  EXPECT_NE(svg.find("data-series=\"p99\" data-value=\"90\""), std::string::npos);
  // Bars are drawn to their value: the tallest bar of a panel reaches no higher than the panel's top tick.
  std::smatch m;
  const std::string first_bar = svg.substr(svg.find("<rect class=\"bar\""));
  ASSERT_TRUE(std::regex_search(first_bar, m, std::regex("height=\"([0-9.]+)\"")));
  EXPECT_GT(std::stod(m[1]), 0);
}

}  // namespace
}  // namespace parallm::bench
