// Engine: continuous batching. Requests join between steps; each Step() is schedule -> execute -> update.
// One thread owns the engine: callers on other threads go through the LLM class or the server's queue.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "cache/kv_cache_manager.h"
#include "cache/kv_storage.h"
#include "engine/draft_model.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"
#include "model/model.h"

namespace parallm {

struct EngineConfig {
  int32_t num_kv_blocks = 0;      // 0: from kv_cache_gb
  double kv_cache_gb = 1.0;         // KV blocks and, for hybrid models, their state slots (cache/cache_budget.h)
  int32_t block_size = 16;
  // --kv-cache-dtype: f16 and bf16 halve the bytes per token, int8 quarters them; nullopt ("auto") is the model's own
  // type (Model::AutoKvDtype), which Engine::Resolve writes here.
  std::optional<KvDtype> kv_cache_dtype;
  bool enable_prefix_caching = true;  // off for hybrid models (see Engine::Resolve)
  // Hybrid models (Nemotron-H): requests that may hold a recurrent-state slot at once. 0: from the budget, as
  // cache/cache_budget.h splits kv_cache_gb (max_num_seqs slots, at most half the budget, the rest KV blocks), or
  // max_num_seqs when num_kv_blocks is given. Fewer than max_num_seqs makes the state memory the limit on admission.
  int32_t num_state_slots = 0;
  SchedulerConfig scheduler;
  // The draft model when scheduler.speculative uses one (LoadDraftModel loads it from the config's path). Its KV
  // cache has as many blocks as the target's (it holds the same requests' tokens), of its own, smaller, size.
  std::shared_ptr<Model> draft_model;
  int threads = 0;                // 0: all cores
};

// Loads the draft model that `config->scheduler.speculative` names, when it names one and none is loaded yet,
// checked against `target` (LoadDraftModel).
Status LoadDraftModelFor(const Model& target, EngineConfig* config);

// What a step did to one request: tokens it gained, and whether it is done.
struct RequestOutput {
  RequestId id;
  RequestId parent_id = 0;   // n > 1: the request this copy was forked from (0 for the request itself)
  int32_t choice_index = 0;  // which of the n copies
  std::vector<int32_t> new_tokens;
  std::vector<SampleResult> new_samples;  // with logprobs, when asked
  bool finished = false;
  std::unique_ptr<Request> request;       // the final state, when finished
};

// Steps whose every scheduled request computed only tokens after its prompt (pure decode: no prefill chunk in
// the step), timed from Schedule to Update: benchmarks read decode speed from them apart from prefill.
struct DecodeStepStats {
  int64_t steps = 0;
  int64_t tokens = 0;  // tokens computed in those steps
  double seconds = 0;
};

class Engine {
 public:
  Engine(Model& model, const EngineConfig& config);

  // Checks a request as Add does, without queueing it. Reads only the configuration: safe from any thread.
  Status Validate(std::span<const int32_t> prompt, const SamplingParams& params) const;
  // Validates and queues a request; errors name the problem (prompt too long for the context, bad params).
  // `adapter`: a LoRA adapter loaded for this model (LoadLoraAdapter), nullptr for the base model.
  Result<RequestId> Add(std::vector<int32_t> prompt, const SamplingParams& params, int32_t priority = 0,
                        std::shared_ptr<const LoraAdapter> adapter = nullptr);
  void Cancel(RequestId id);
  // Ends one request (not its copies) as if it stopped: a stop string matched in its text.
  void Stop(RequestId id) { scheduler_.Abort(id, FinishReason::kStop, /*with_copies=*/false); }
  // Whether Step() has work: requests to run, or finished ones (cancelled, stopped) still to report.
  bool HasUnfinished() const { return scheduler_.num_unfinished() > 0 || scheduler_.has_finished_to_report(); }

  // One step of continuous batching. Returns the requests that gained tokens or finished.
  std::vector<RequestOutput> Step();

  const KVCacheManager& kv_manager() const { return kv_manager_; }
  const Scheduler& scheduler() const { return scheduler_; }
  const EngineConfig& config() const { return config_; }
  // The type the KV cache stores (config().kv_cache_dtype once resolved).
  KvDtype kv_dtype() const { return *config_.kv_cache_dtype; }
  const Model& model() const { return model_; }
  // Hybrid models: the recurrent-state storage (nullptr otherwise).
  const SsmStateStorage* state_storage() const { return state_storage_.get(); }
  // The draft model's proposer (nullptr without one).
  const DraftModel* draft_model() const { return drafter_.get(); }
  void CheckIntegrity() const { scheduler_.CheckIntegrity(); }
  const DecodeStepStats& decode_step_stats() const { return decode_steps_; }

 private:
  static EngineConfig Resolve(const Model& model, EngineConfig config);
  // Samples one token from `rows` (one row), or with a draft of num_draft tokens (num_draft + 1 rows) the
  // accepted draft tokens and the token after them.
  std::vector<SampleResult> SampleWithDraft(Request& r, std::span<float> rows, int32_t num_draft);
  // The same for a request that picks the argmax of each row (Request::PicksArgMax), from the rows' argmax `picks`.
  static std::vector<SampleResult> ArgMaxWithDraft(const Request& r, std::span<const int32_t> picks, int32_t num_draft);
  // n > 1: forks copies 1..n-1 of `parent`, whose prompt was just computed; `logits` is its row.
  // With a draft model: the proposals of the requests that decode this step, before Schedule takes them.
  void ProposeWithDraftModel();
  void ForkCopies(const ScheduledRequest& parent, std::span<const float> logits, std::vector<RequestOutput>* outputs);

  Model& model_;
  EngineConfig config_;
  ThreadPool pool_;
  PagedKvStorage kv_storage_;
  std::unique_ptr<SsmStateStorage> state_storage_;  // hybrid models only
  KVCacheManager kv_manager_;
  Scheduler scheduler_;
  ModelRunner runner_;
  std::unique_ptr<DraftModel> drafter_;  // with a draft model only
  RequestId next_id_ = 1;
  std::vector<int32_t> eos_tokens_;  // the model's end-of-generation tokens (LoadedModel::eos_ids)
  DecodeStepStats decode_steps_;
};

}  // namespace parallm
