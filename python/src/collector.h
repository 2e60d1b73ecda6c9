// Collector: where the engine thread leaves the progress of the requests one Python call (or one asyncio engine)
// submitted, for Python to take under its own lock; the engine never waits for Python nor touches its objects.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/async_engine.h"

namespace parallm::python {

// One choice of a finished request: everything it produced.
struct ChoiceResult {
  int32_t index = 0;
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<SampleResult> samples;  // one per token, when logprobs were asked
  std::string finish_reason;          // "stop", "length", "abort"
};

// A request whose every choice is done (or that the engine refused: `error` is set).
struct FinishedRequest {
  int64_t tag = 0;  // what the caller submitted it with
  std::vector<ChoiceResult> choices;
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;
  std::string error;
  double ttft_seconds = 0;   // submission -> choice 0's first token (0 when it had none)
  double total_seconds = 0;  // submission -> done
};

// One step's progress of one request (delta mode).
struct Delta {
  int64_t tag = 0;
  RequestUpdate update;
  double elapsed_seconds = 0;  // since submission
};

// "stop", "length", "abort" (vLLM's names), "" while running.
std::string FinishReasonText(FinishReason reason);

class Collector : public std::enable_shared_from_this<Collector> {
 public:
  // deltas: Take returns every update as it comes (streaming); otherwise only finished requests, accumulated
  // here so Python handles one object per request. notify: a pipe whose read end becomes readable when there is
  // something to take (asyncio's add_reader).
  Collector(bool deltas, bool notify);
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // The sink to submit request `tag` (with n choices) with. Call before AsyncEngine::Submit.
  RequestSink Expect(int64_t tag, int32_t n);
  // The submission was refused: forget `tag`.
  void Forget(int64_t tag);

  // Waits up to `timeout_seconds` (< 0: no limit) for something to take, then takes everything there is.
  // Call without holding the GIL.
  std::vector<FinishedRequest> TakeFinished(double timeout_seconds);
  std::vector<Delta> TakeDeltas(double timeout_seconds);
  // Waits until every expected request is done (after cancelling them all), dropping what they send.
  void WaitIdle();

  bool deltas() const { return deltas_; }
  int fileno() const { return pipe_[0]; }
  int num_open() const;  // expected and not done

 private:
  using Clock = std::chrono::steady_clock;
  struct Open {
    FinishedRequest result;
    Clock::time_point submitted;
    bool first_token = false;
  };
  void OnUpdate(int64_t tag, RequestUpdate update);  // on the engine thread
  void Signal();                                     // under mu_
  void Unsignal();                                   // under mu_
  template <typename T>
  std::vector<T> Take(std::deque<T>* queue, double timeout_seconds);

  const bool deltas_;
  int pipe_[2] = {-1, -1};
  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::unordered_map<int64_t, Open> open_;
  std::deque<FinishedRequest> finished_;
  std::deque<Delta> updates_;
  bool signalled_ = false;
};

}  // namespace parallm::python
