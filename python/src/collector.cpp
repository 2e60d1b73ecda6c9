// Collector: the engine thread appends under a mutex and signals; Python takes everything at once.
#include "collector.h"

#include <fcntl.h>
#include <unistd.h>

#include <stdexcept>

namespace parallm::python {

std::string FinishReasonText(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kCancelled: return "abort";
    case FinishReason::kNone: return "";
  }
  return "";
}

Collector::Collector(bool deltas, bool notify) : deltas_(deltas) {
  if (notify && pipe2(pipe_, O_NONBLOCK | O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
}

Collector::~Collector() {
  for (int fd : pipe_)
    if (fd >= 0) close(fd);
}

RequestSink Collector::Expect(int64_t tag, int32_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  Open& open = open_[tag];
  open.result.tag = tag;
  open.result.choices.resize(static_cast<size_t>(n));
  for (int32_t k = 0; k < n; ++k) open.result.choices[static_cast<size_t>(k)].index = k;
  open.submitted = Clock::now();
  return [self = shared_from_this(), tag](RequestUpdate update) { self->OnUpdate(tag, std::move(update)); };
}

void Collector::Forget(int64_t tag) {
  std::lock_guard<std::mutex> lock(mu_);
  open_.erase(tag);
}

int Collector::num_open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(open_.size());
}

void Collector::OnUpdate(int64_t tag, RequestUpdate update) {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(tag);
  if (it == open_.end()) return;  // cannot happen: every sink was made by Expect and is done once
  Open& open = it->second;
  const double elapsed = std::chrono::duration<double>(now - open.submitted).count();
  FinishedRequest& r = open.result;
  r.prompt_tokens = update.prompt_tokens;
  r.cached_tokens = update.cached_tokens;
  if (!update.error.empty()) r.error = update.error;
  for (const ChoiceUpdate& c : update.choices) {
    if (c.index == 0 && !c.new_tokens.empty() && !open.first_token) {
      open.first_token = true;
      r.ttft_seconds = elapsed;
    }
    if (deltas_) continue;  // streaming callers keep their own totals
    if (c.index < 0 || static_cast<size_t>(c.index) >= r.choices.size()) continue;
    ChoiceResult& choice = r.choices[static_cast<size_t>(c.index)];
    choice.text += c.new_text;
    choice.token_ids.insert(choice.token_ids.end(), c.new_tokens.begin(), c.new_tokens.end());
    choice.samples.insert(choice.samples.end(), c.new_samples.begin(), c.new_samples.end());
    if (c.finished) choice.finish_reason = FinishReasonText(c.finish_reason);
  }
  const bool done = update.done;
  if (deltas_) {
    updates_.push_back(Delta{tag, std::move(update), elapsed});
    Signal();
  }
  if (done) {
    r.total_seconds = elapsed;
    if (!deltas_) {
      finished_.push_back(std::move(r));
      Signal();
    }
    open_.erase(it);
    if (open_.empty()) Signal();  // WaitIdle
  }
}

void Collector::Signal() {
  ready_.notify_all();
  if (pipe_[1] >= 0 && !signalled_) {
    const char byte = 1;
    // The pipe is non-blocking and holds at most one byte from us between takes: this write cannot block.
    if (write(pipe_[1], &byte, 1) == 1) signalled_ = true;
  }
}

void Collector::Unsignal() {
  if (pipe_[0] < 0 || !signalled_) return;
  char buf[64];
  while (read(pipe_[0], buf, sizeof buf) > 0) {
  }
  signalled_ = false;
}

template <typename T>
std::vector<T> Collector::Take(std::deque<T>* queue, double timeout_seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  auto have = [&] { return !queue->empty(); };
  if (timeout_seconds < 0) {
    ready_.wait(lock, have);
  } else if (timeout_seconds > 0) {
    ready_.wait_for(lock, std::chrono::duration<double>(timeout_seconds), have);
  }
  std::vector<T> out(std::make_move_iterator(queue->begin()), std::make_move_iterator(queue->end()));
  queue->clear();
  Unsignal();
  return out;
}

std::vector<FinishedRequest> Collector::TakeFinished(double timeout_seconds) {
  return Take(&finished_, timeout_seconds);
}

std::vector<Delta> Collector::TakeDeltas(double timeout_seconds) { return Take(&updates_, timeout_seconds); }

void Collector::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  ready_.wait(lock, [&] { return open_.empty(); });
  finished_.clear();
  updates_.clear();
  Unsignal();
}

}  // namespace parallm::python
