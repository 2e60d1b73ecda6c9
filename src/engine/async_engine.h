// AsyncEngine: the engine on its own thread, for callers on many threads (the HTTP server). Callers submit
// requests and receive each request's progress through a callback; nothing they do blocks the engine loop,
// and the engine never waits for them. Text (detokenization, stop strings) is produced on the engine thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_metrics.h"
#include "tokenizer/tokenizer.h"

namespace parallm {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  SamplingParams params;
  int32_t priority = 0;  // lower runs first
  std::shared_ptr<const LoraAdapter> adapter = nullptr;  // LoRA adapter (nullptr: the base model)
};

// One choice's progress in one engine step.
struct ChoiceUpdate {
  int32_t index = 0;                      // which of the request's n completions
  std::vector<int32_t> new_tokens;        // sampled this step (a stop token is not included)
  std::vector<SampleResult> new_samples;  // one per new token, when logprobs were asked
  std::string new_text;                   // text that became final (complete UTF-8, cut before a stop string)
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;  // when finished
};

// What the engine tells a request's sink after a step in which it progressed.
struct RequestUpdate {
  std::vector<ChoiceUpdate> choices;  // the choices that progressed
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;          // prompt tokens served from the prefix cache (known once the prompt ran)
  bool done = false;                  // every choice has finished: the last update this request gets
  std::string error;                  // the engine refused the request after all (done is true with it)
};

// Called on the engine thread, once per step in which the request progressed; must return quickly and never
// block (post the update to the caller's own executor).
using RequestSink = std::function<void(RequestUpdate update)>;

struct AsyncEngineConfig {
  int32_t max_queued_requests = 1024;  // requests waiting beyond those running; more are refused (HTTP 429)
};

enum class Admission { kAccepted, kQueueFull, kShuttingDown };

struct Submission {
  Admission admission = Admission::kAccepted;
  uint64_t id = 0;  // when accepted: what Cancel takes
};

class AsyncEngine {
 public:
  // Starts the engine thread. `tokenizer` may be null: updates then carry no text and `stop` strings are refused.
  AsyncEngine(std::unique_ptr<Model> model, const EngineConfig& config, std::shared_ptr<const Tokenizer> tokenizer,
              const AsyncEngineConfig& async_config = {});
  // Cancels whatever is left and joins the engine thread.
  ~AsyncEngine();
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  // Checks a request the way the engine will (prompt empty or outside the vocabulary, too long for the
  // context, does not fit the KV cache, parameters out of range). Thread-safe; errors name the problem.
  Status Validate(const GenerationRequest& request) const;
  // Queues a request that passed Validate. `sink` receives its updates until one has `done`.
  Submission Submit(GenerationRequest request, RequestSink sink);
  // Finishes a request at once (a client went away): its blocks are freed in the engine's next iteration and
  // its sink gets one last update (finish reason kCancelled). Unknown or finished ids are ignored. Thread-safe.
  void Cancel(uint64_t id);

  // Stops accepting (Submit answers kShuttingDown), waits up to `grace_seconds` for running and queued requests
  // to finish, then cancels the rest. Returns how many were cancelled. Thread-safe; call once.
  int32_t Drain(double grace_seconds);

  // A consistent copy of the metrics, taken between steps. Thread-safe.
  EngineMetrics Metrics() const;
  // Requests submitted and not yet done (queued, running, or cancelled but not yet reported).
  int32_t num_unfinished() const { return num_unfinished_.load(); }

  const ModelConfig& model_config() const { return model_->config(); }
  const EngineConfig& engine_config() const { return engine_.config(); }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }

 private:
  struct Pending;
  struct Active;
  void Loop();
  void TakeInbox();
  void Dispatch(std::vector<RequestOutput> outputs);
  void UpdateGauges();
  void Finished();  // one submission is done: counts down num_unfinished_

  std::unique_ptr<Model> model_;
  Engine engine_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  AsyncEngineConfig async_config_;

  // Inbox, shared with callers.
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::unique_ptr<Pending>> submitted_;
  std::vector<uint64_t> cancelled_;
  bool stopping_ = false;   // no new submissions
  bool exit_ = false;       // the loop ends
  bool cancel_all_ = false; // Drain's grace ran out
  std::condition_variable idle_;  // signalled when num_unfinished_ drops to 0
  std::atomic<uint64_t> next_id_{1};
  std::atomic<int32_t> num_unfinished_{0};

  // Engine-thread state.
  std::unordered_map<uint64_t, std::unique_ptr<Active>> active_;  // by submission id
  std::unordered_map<RequestId, uint64_t> by_engine_id_;        // engine request id (each copy) -> submission id

  mutable std::mutex metrics_mu_;
  EngineMetrics metrics_;

  std::thread thread_;  // last: starts after everything above is built
};

}  // namespace parallm
