// SVG line and bar charts (see chart.h). Sizes are in SVG user units (pixels at 100%).
#include "bench/chart.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

namespace parallm::bench {

namespace {

constexpr double kWidth = 900, kHeight = 520;
// Colour-blind-safe palette (Okabe & Ito).
const char* const kColors[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"};
const char* Color(size_t i) { return kColors[i % (sizeof(kColors) / sizeof(kColors[0]))]; }

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Short tick labels: 1500 -> "1500", 0.25 -> "0.25", 2e6 -> "2M".
std::string TickLabel(double v) {
  if (std::fabs(v) >= 1e6) return fmt::format("{:g}M", v / 1e6);
  if (std::fabs(v) >= 1e4) return fmt::format("{:g}k", v / 1e3);
  return fmt::format("{:g}", std::round(v * 1e6) / 1e6);
}

// Data labels: whole numbers from 100 up (18245, not 1.82e+04), three significant digits below.
std::string ValueLabel(double v) {
  if (std::fabs(v) >= 100) return fmt::format("{:.0f}", v);
  if (std::fabs(v) >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

std::string Header(const std::string& title, const std::string& subtitle, double width, double height) {
  std::string s = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"13\">\n"
      "<title>{2}</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text class=\"title\" x=\"{3}\" y=\"28\" text-anchor=\"middle\" font-size=\"18\" font-weight=\"bold\">{2}</text>\n",
      width, height, Escape(title), width / 2);
  if (!subtitle.empty())
    s += fmt::format("<text class=\"subtitle\" x=\"{}\" y=\"48\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n",
                     width / 2, Escape(subtitle));
  return s;
}

// A horizontal legend centred at (cx, y), one swatch per name.
std::string Legend(const std::vector<std::string>& names, double cx, double y) {
  // Item widths from the text length: ~7 px per character at 13 px, plus the swatch and a gap.
  std::vector<double> widths;
  double total = 0;
  for (const std::string& n : names) total += widths.emplace_back(20 + 7.0 * static_cast<double>(n.size()) + 30);
  double x = cx - total / 2;
  std::string s = "<g class=\"legend\">\n";
  for (size_t i = 0; i < names.size(); x += widths[i], ++i)
    s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"14\" height=\"14\" fill=\"{}\"/>"
                     "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
                     x, y - 11, Color(i), x + 20, y, Escape(names[i]));
  return s + "</g>\n";
}

// Whether series k's point i is the highest of the series at that index: its value label goes above the
// point, the others' below, so labels of close series do not overprint.
bool HighestAt(const LineChart& chart, size_t k, size_t i) {
  for (size_t j = 0; j < chart.series.size(); ++j)
    if (j != k && i < chart.series[j].y.size() && chart.series[j].y[i] > chart.series[k].y[i]) return false;
  return true;
}

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::floor(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  if (ticks.back() < hi) ticks.push_back(ticks.back() + step);
  return ticks;
}

std::string RenderLineChart(const LineChart& chart) {
  const double left = 80, right = kWidth - 30, top = 70, bottom = kHeight - 100;
  double x_lo = 0, x_hi = 1, y_hi = 0;
  bool any = false;
  for (const LineSeries& s : chart.series)
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      const double x = chart.log2_x ? std::log2(std::max(s.x[i], 1e-12)) : s.x[i];
      x_lo = any ? std::min(x_lo, x) : x;
      x_hi = any ? std::max(x_hi, x) : x;
      y_hi = std::max(y_hi, s.y[i]);
      any = true;
    }
  if (x_hi <= x_lo) x_hi = x_lo + 1;
  std::vector<double> x_ticks;
  if (chart.log2_x) {
    for (double e = std::floor(x_lo); e <= std::ceil(x_hi); e += 1) x_ticks.push_back(e);
    // A quarter step of room on each side, so the end points are not drawn on the frame.
    x_lo = x_ticks.front() - 0.25;
    x_hi = std::max(x_ticks.back(), x_ticks.front() + 1) + 0.25;
  } else {
    x_ticks = NiceTicks(x_lo, x_hi);
    x_lo = x_ticks.front();
    x_hi = x_ticks.back();
  }
  const std::vector<double> y_ticks = NiceTicks(0, y_hi > 0 ? y_hi : 1);
  const double y_top = y_ticks.back();
  auto px = [&](double x) { return left + (x - x_lo) / (x_hi - x_lo) * (right - left); };
  auto py = [&](double y) { return bottom - y / y_top * (bottom - top); };

  std::string s = Header(chart.title, chart.subtitle, kWidth, kHeight);
  s += "<g class=\"axes\" stroke=\"#ccc\">\n";
  for (double t : y_ticks) s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>\n", left, right, py(t), py(t));
  s += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#333\"/>"
                   "<line x1=\"{0}\" x2=\"{3}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#333\"/>\n</g>\n",
                   left, top, bottom, right);
  for (double t : y_ticks)
    s += fmt::format("<text class=\"ytick\" x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 8, py(t) + 4, TickLabel(t));
  for (double t : x_ticks)
    s += fmt::format("<text class=\"xtick\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(t), bottom + 20,
                     TickLabel(chart.log2_x ? std::exp2(t) : t));
  s += fmt::format("<text class=\"xlabel\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (left + right) / 2,
                   bottom + 44, Escape(chart.x_label));
  s += fmt::format("<text class=\"ylabel\" transform=\"translate(22 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
                   (top + bottom) / 2, Escape(chart.y_label));
  std::vector<std::string> names;
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const LineSeries& ser = chart.series[k];
    names.push_back(ser.name);
    std::string points;
    std::string dots;
    for (size_t i = 0; i < std::min(ser.x.size(), ser.y.size()); ++i) {
      const double x = px(chart.log2_x ? std::log2(std::max(ser.x[i], 1e-12)) : ser.x[i]), y = py(ser.y[i]);
      points += fmt::format("{}{:.1f},{:.1f}", i ? " " : "", x, y);
      dots += fmt::format("<circle class=\"point\" data-series=\"{}\" data-x=\"{:g}\" data-value=\"{:g}\" cx=\"{:.1f}\" "
                          "cy=\"{:.1f}\" r=\"4\" fill=\"{}\"><title>{}: {:.4g}</title></circle>\n",
                          Escape(ser.name), ser.x[i], ser.y[i], x, y, Color(k), Escape(ser.name), ser.y[i]);
      dots += fmt::format("<text class=\"value\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"10\" "
                          "paint-order=\"stroke\" stroke=\"white\" stroke-width=\"3\" "
                          "fill=\"{}\">{}</text>\n",
                          x, HighestAt(chart, k, i) ? y - 8 : y + 17, Color(k), ValueLabel(ser.y[i]));
    }
    s += fmt::format("<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"2.5\" points=\"{}\"/>\n", Color(k), points);
    s += dots;
  }
  s += Legend(names, kWidth / 2, kHeight - 18);
  return s + "</svg>\n";
}

std::string RenderBarChart(const BarChart& chart) {
  const size_t panels = std::max<size_t>(chart.groups.size(), 1);
  const double margin = 20, panel_w = (kWidth - margin) / static_cast<double>(panels);
  const double top = 90, bottom = kHeight - 70;
  std::string s = Header(chart.title, chart.subtitle, kWidth, kHeight);
  for (size_t g = 0; g < chart.groups.size(); ++g) {
    const BarGroup& group = chart.groups[g];
    const double left = margin + panel_w * static_cast<double>(g) + 50, right = margin + panel_w * static_cast<double>(g + 1) - 12;
    double hi = 0;
    for (double v : group.values) hi = std::max(hi, v);
    const std::vector<double> ticks = NiceTicks(0, hi > 0 ? hi : 1, 4);
    const double y_top = ticks.back();
    auto py = [&](double y) { return bottom - y / y_top * (bottom - top); };
    s += fmt::format("<g class=\"panel\" data-group=\"{}\">\n", Escape(group.label));
    s += fmt::format("<text class=\"group\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" font-weight=\"bold\">{}</text>\n",
                     (left + right) / 2, top - 18, Escape(group.label));
    for (double t : ticks)
      s += fmt::format("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>"
                       "<text class=\"ytick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" font-size=\"11\">{}</text>\n",
                       left, right, py(t), py(t), left - 5, py(t) + 4, TickLabel(t));
    s += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#333\"/>"
                     "<line x1=\"{0:.1f}\" x2=\"{3:.1f}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#333\"/>\n",
                     left, top, bottom, right);
    s += fmt::format("<text class=\"ylabel\" transform=\"translate({:.1f} {}) rotate(-90)\" text-anchor=\"middle\" "
                     "font-size=\"11\">{}</text>\n",
                     left - 38, (top + bottom) / 2, Escape(chart.y_label));
    const double slot = (right - left) / static_cast<double>(std::max<size_t>(group.values.size(), 1));
    for (size_t k = 0; k < group.values.size(); ++k) {
      const double v = group.values[k], x = left + slot * static_cast<double>(k) + slot * 0.15, w = slot * 0.7;
      const std::string name = k < chart.series.size() ? chart.series[k] : fmt::format("series {}", k + 1);
      s += fmt::format("<rect class=\"bar\" data-series=\"{}\" data-value=\"{:g}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
                       "height=\"{:.1f}\" fill=\"{}\"><title>{} {}: {:.4g} {}</title></rect>\n",
                       Escape(name), v, x, py(v), w, bottom - py(v), Color(k), Escape(group.label), Escape(name), v,
                       Escape(chart.y_label));
      s += fmt::format("<text class=\"value\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"10\">{}</text>\n",
                       x + w / 2, py(v) - 4, ValueLabel(v));
    }
    s += "</g>\n";
  }
  s += Legend(chart.series, kWidth / 2, kHeight - 22);
  return s + "</svg>\n";
}

Status WriteSvg(const std::string& path, const std::string& svg) {
  std::ofstream out(path, std::ios::binary);
  out << svg;
  out.close();
  if (!out) return Err("{}: cannot write the chart", path);
  return Status::Ok();
}

}  // namespace parallm::bench
