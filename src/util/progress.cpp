// ProgressBar: "label [#####.....]  45%  12.3 MB/s  eta 4s" redrawn in place with a carriage return.
#include "util/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace parallm {

bool ProgressBar::Enabled() { return ::isatty(STDERR_FILENO) == 1 && std::getenv("PARALLM_NO_PROGRESS") == nullptr; }

ProgressBar::ProgressBar(std::string label, double total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), enabled_(Enabled()) {
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() {
  if (!finished_ && enabled_) std::fputc('\n', stderr);
}

void ProgressBar::Add(double done) {
  done_ += done;
  Draw(false);
}

void ProgressBar::Finish() {
  done_ = total_;
  Draw(true);
  if (enabled_ && !finished_) std::fputc('\n', stderr);
  finished_ = true;
}

void ProgressBar::Draw(bool force) {
  if (!enabled_ || finished_) return;
  auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double frac = total_ > 0 ? std::clamp(done_ / total_, 0.0, 1.0) : 1.0;
  const double secs = std::chrono::duration<double>(now - start_).count();
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  const double rate = secs > 0 ? done_ / secs : 0;
  const double eta = rate > 0 ? (total_ - done_) / rate : 0;
  std::fprintf(stderr, "\r%s [%s] %3.0f%%", label_.c_str(), bar.c_str(), frac * 100);
  if (!unit_.empty()) std::fprintf(stderr, "  %.1f %s/s", rate, unit_.c_str());
  std::fprintf(stderr, "  eta %.0fs   ", eta);
  std::fflush(stderr);
}

}  // namespace parallm
