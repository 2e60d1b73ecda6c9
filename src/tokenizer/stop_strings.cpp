// StopStringMatcher: earliest-completing stop string over held-back text plus the new chunk.
#include "tokenizer/stop_strings.h"

#include <algorithm>

namespace parallm {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) continue;
    max_stop_ = std::max(max_stop_, stops[i].size());
    stops_.push_back(std::move(stops[i]));
    stop_ids_.push_back(static_cast<int32_t>(i));
  }
}

StopStringMatcher::Step StopStringMatcher::Feed(std::string_view chunk) {
  Step step;
  if (stopped_) {
    step.stopped = true;
    return step;
  }
  std::string text = std::move(held_);
  held_.clear();
  text.append(chunk);

  // The stop that completes first: no stop lies wholly inside the held text (it would have matched before),
  // so every match found here ends in the new chunk.
  size_t best_end = std::string::npos, best_begin = 0;
  int32_t best = -1;
  for (size_t s = 0; s < stops_.size(); ++s) {
    const size_t at = text.find(stops_[s]);
    if (at == std::string::npos) continue;
    const size_t end = at + stops_[s].size();
    if (end < best_end || (end == best_end && at < best_begin)) {
      best_end = end;
      best_begin = at;
      best = static_cast<int32_t>(s);
    }
  }
  if (best >= 0) {
    stopped_ = true;
    step.stopped = true;
    step.stop_index = stop_ids_[static_cast<size_t>(best)];
    step.text = text.substr(0, best_begin);
    final_size_ += step.text.size();
    return step;
  }

  // Hold the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (size_t len = std::min(text.size(), max_stop_ - (max_stop_ > 0 ? 1 : 0)); len > 0; --len) {
    const std::string_view suffix = std::string_view(text).substr(text.size() - len);
    const bool prefix = std::any_of(stops_.begin(), stops_.end(), [&](const std::string& stop) {
      return stop.size() > len && std::string_view(stop).substr(0, len) == suffix;
    });
    if (prefix) {
      hold = len;
      break;
    }
  }
  held_ = text.substr(text.size() - hold);
  text.resize(text.size() - hold);
  final_size_ += text.size();
  step.text = std::move(text);
  return step;
}

std::string StopStringMatcher::Flush() {
  if (stopped_) return {};
  std::string out = std::move(held_);
  held_.clear();
  final_size_ += out.size();
  return out;
}

}  // namespace parallm
