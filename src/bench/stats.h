// Timing and latency statistics for the benchmark reports: mean, standard deviation and percentiles computed as
// numpy does (linear interpolation between the closest ranks), so figures match vLLM's `bench serve` on the same data.
#pragma once

#include <chrono>
#include <span>
#include <vector>

#include <boost/json.hpp>

namespace parallm::bench {

// Seconds of steady_clock time since `start`: what the offline benchmarks time their runs with.
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// q in [0, 100]; numpy.percentile's default ("linear") method. 0 for an empty sample.
double Percentile(std::span<const double> values, double q);

// Summary of a sample, in the sample's own unit. An empty sample gives all zeros (vLLM writes 0 there too).
struct Summary {
  size_t count = 0;
  double mean = 0, stddev = 0, min = 0, max = 0;  // stddev: population (numpy.std's default ddof=0)
  double median = 0, p50 = 0, p90 = 0, p99 = 0;
};
Summary Summarize(std::span<const double> values);

// Adds vLLM's field names for one metric, converted from seconds to milliseconds: mean_<name>_ms,
// median_<name>_ms, std_<name>_ms, p50_<name>_ms, p90_<name>_ms, p99_<name>_ms.
void AddMillisecondFields(boost::json::object& out, const char* name, const Summary& seconds);

}  // namespace parallm::bench
