// ProgressBar: a one-line bar on stderr for long work (writing models, benchmarks); silent when stderr is
// not a terminal, so logs and tests stay clean.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace parallm {

class ProgressBar {
 public:
  // `total` units of work (bytes, tensors, requests); `unit` names them in the rate ("MB", "tok").
  ProgressBar(std::string label, double total, std::string unit = "");
  ~ProgressBar();
  void Add(double done);  // adds `done` units and redraws at most ~10 times a second
  void Finish();          // draws 100% and ends the line

  static bool Enabled();  // stderr is a terminal and PARALLM_NO_PROGRESS is unset

 private:
  void Draw(bool force);
  std::string label_, unit_;
  double total_, done_ = 0;
  bool enabled_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace parallm
