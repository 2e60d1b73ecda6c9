// Dependency-free SVG charts for the benchmark commands: line charts (several series against one x axis) and
// grouped bar charts drawn as small multiples (each group its own panel and y scale, so a 2 ms TPOT is not
// flattened next to a 20 s latency). Titles, axis labels with units and a legend are part of every chart.
//
// Elements carry classes for scripts and tests: every data point is a <circle class="point">, every bar a
// <rect class="bar">, both with data-series and data-value attributes.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace parallm::bench {

struct LineSeries {
  std::string name;
  std::vector<double> x, y;  // same length
};

struct LineChart {
  std::string title, subtitle;  // subtitle: model, date, workload
  std::string x_label, y_label;  // with units, e.g. "output tokens/s"
  bool log2_x = false;  // x ticks at powers of two, evenly spaced (concurrency sweeps)
  std::vector<LineSeries> series;
};

struct BarGroup {
  std::string label;           // the panel's title, e.g. "TTFT"
  std::vector<double> values;  // one per series
};

struct BarChart {
  std::string title, subtitle;
  std::string y_label;               // every panel's y axis, e.g. "ms"
  std::vector<std::string> series;   // the bars of each group, e.g. mean, median, p99
  std::vector<BarGroup> groups;
};

std::string RenderLineChart(const LineChart& chart);
std::string RenderBarChart(const BarChart& chart);

// Ticks for an axis covering [lo, hi]: about `target` steps of 1, 2 or 5 times a power of ten.
std::vector<double> NiceTicks(double lo, double hi, int target = 5);

// Writes `svg` to `path`.
Status WriteSvg(const std::string& path, const std::string& svg);

}  // namespace parallm::bench
