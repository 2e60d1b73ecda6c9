// Percentiles and summaries of latency samples (see stats.h).
#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace parallm::bench {

namespace {
double SortedPercentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  // numpy "linear": the virtual index (n - 1) * q / 100, interpolated between its neighbours.
  const double index = (static_cast<double>(sorted.size()) - 1) * std::clamp(q, 0.0, 100.0) / 100.0;
  const size_t lo = static_cast<size_t>(std::floor(index));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = index - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}
}  // namespace

double Percentile(std::span<const double> values, double q) {
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  return SortedPercentile(sorted, q);
}

Summary Summarize(std::span<const double> values) {
  Summary s;
  s.count = values.size();
  if (values.empty()) return s;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double v : sorted) sum += v;
  s.mean = sum / static_cast<double>(sorted.size());
  double sq = 0;
  for (double v : sorted) sq += (v - s.mean) * (v - s.mean);
  s.stddev = std::sqrt(sq / static_cast<double>(sorted.size()));
  s.min = sorted.front();
  s.max = sorted.back();
  s.median = s.p50 = SortedPercentile(sorted, 50);
  s.p90 = SortedPercentile(sorted, 90);
  s.p99 = SortedPercentile(sorted, 99);
  return s;
}

void AddMillisecondFields(boost::json::object& out, const char* name, const Summary& seconds) {
  const std::string n = name;
  out["mean_" + n + "_ms"] = seconds.mean * 1e3;
  out["median_" + n + "_ms"] = seconds.median * 1e3;
  out["std_" + n + "_ms"] = seconds.stddev * 1e3;
  out["p50_" + n + "_ms"] = seconds.p50 * 1e3;
  out["p90_" + n + "_ms"] = seconds.p90 * 1e3;
  out["p99_" + n + "_ms"] = seconds.p99 * 1e3;
}

}  // namespace parallm::bench
