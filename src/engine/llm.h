// LLM: the library's front door (the C++ face of mlx_parallm's batch_generate): load a model, generate
// completions for many prompts at once through the continuous-batching engine, with per-request timing.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace parallm {

// One of a prompt's n completions.
struct Choice {
  std::string text;                   // decoded text, cut before a matched stop string (needs a tokenizer)
  std::vector<int32_t> ids;           // generated tokens (no stop token)
  std::vector<SampleResult> samples;  // per token, when logprobs were asked
  FinishReason finish_reason = FinishReason::kNone;
  int32_t preemptions = 0;
  double ttft_seconds = 0;            // arrival -> first token
  double total_seconds = 0;           // arrival -> finished
};

struct Completion {
  std::vector<Choice> choices;  // params.n of them
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;    // prompt tokens served from the prefix cache
  // Shorthands for the first choice (n = 1).
  const std::vector<int32_t>& ids() const { return choices.at(0).ids; }
  FinishReason finish_reason() const { return choices.at(0).finish_reason; }
};

struct StreamEvent {
  size_t index;                     // which prompt
  int32_t choice;                   // which of its n completions
  const std::vector<int32_t>& new_tokens;
  const std::string& new_text;      // text that became final (empty without a tokenizer)
  bool finished;                    // this choice is done
  const Completion* completion;     // set when the whole prompt (all choices) is done
};

class LLM {
 public:
  // Loads the model, and the draft model a speculative config names (LoadDraftModelFor).
  static Result<std::unique_ptr<LLM>> Load(const std::string& path, EngineConfig config);
  // `config.draft_model` must be loaded already when the speculative config uses one.
  LLM(std::unique_ptr<Model> model, const EngineConfig& config);

  // Runs every prompt (one SamplingParams each, or one for all) to completion, batched; `adapters` (empty, one for
  // all, or one per prompt; nullptr = the base model) are the LoRA adapters the prompts run with. Bad input (an empty or
  // too long prompt, invalid params) fails the whole call before anything runs, naming the prompt.
  Result<std::vector<Completion>> Generate(const std::vector<std::vector<int32_t>>& prompts,
                                           const std::vector<SamplingParams>& params,
                                           const std::function<void(const StreamEvent&)>& on_event = nullptr,
                                           const std::vector<std::shared_ptr<const LoraAdapter>>& adapters = {});

  // With a tokenizer, completions carry text, streamed incrementally, and `stop` strings end requests.
  void SetTokenizer(std::shared_ptr<const Tokenizer> tokenizer) { tokenizer_ = std::move(tokenizer); }

  Model& model() { return *model_; }
  Engine& engine() { return engine_; }

 private:
  std::unique_ptr<Model> model_;
  Engine engine_;
  std::shared_ptr<const Tokenizer> tokenizer_;
};

}  // namespace parallm
