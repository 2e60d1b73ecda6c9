// Request: one sequence being generated: its tokens, how many of them are in the KV cache
// (num_computed_tokens), its sampling state and its timing. Owned and mutated by the engine thread only.
#pragma once

#include <chrono>
#include <memory>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/kv_cache_manager.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "model/lora.h"
#include "structured/matcher.h"

namespace parallm {

enum class RequestStatus { kWaiting, kRunning, kPreempted, kFinished };
enum class FinishReason { kNone, kLength, kStop, kCancelled };
const char* FinishReasonName(FinishReason r);  // "length", "stop", "cancelled"

struct Request {
  using Clock = std::chrono::steady_clock;

  // `eos_tokens`: the tokens that end generation (unless params.ignore_eos); the span must outlive the request
  // (the engine owns the list).
  Request(RequestId id, std::vector<int32_t> prompt, SamplingParams params, std::span<const int32_t> eos_tokens);

  RequestId id;
  std::vector<int32_t> tokens;  // the prompt, then the generated tokens
  int32_t num_prompt_tokens;
  SamplingParams params;
  Sampler sampler;
  std::span<const int32_t> eos_tokens;  // empty: none
  int32_t priority = 0;  // lower runs first; FCFS within a priority
  // The LoRA adapter the request runs with (nullptr: the base model). Held here, so an adapter unloaded or evicted
  // while requests use it stays alive until they finish.
  std::shared_ptr<const LoraAdapter> adapter;
  // n > 1: copies 1..n-1 are forked from copy 0 once its prompt is computed; they name it here.
  RequestId parent_id = 0;
  int32_t choice_index = 0;

  RequestStatus status = RequestStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  // Tokens whose K/V are in the cache. Phase-free scheduling: each step computes tokens
  // [num_computed_tokens, num_tokens()) or a chunk of them; prefill and decode are the same thing.
  int32_t num_computed_tokens = 0;
  int32_t num_cached_tokens = 0;  // prompt tokens found in the prefix cache on first schedule
  int32_t num_preemptions = 0;
  std::vector<SampleResult> samples;  // per output token, when logprobs were asked
  // Speculative decoding: this step's draft (tokens after the last one, proposed by the scheduler and computed
  // with it), and the totals of drafted and accepted tokens.
  std::vector<int32_t> draft_tokens;
  // With a draft model: its proposal for the next step, made before Schedule (which takes what fits from it).
  std::vector<int32_t> model_draft;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  // Structured output (params.grammar): where the output stands in its grammar, the step's mask buffer, and
  // whether the grammar has ended the request (complete with nothing allowed after, or a refused token); the
  // last token is then kept, unlike a stop token.
  std::unique_ptr<structured::GrammarMatcher> matcher;
  std::vector<uint32_t> allowed;
  bool grammar_ended = false;

  Clock::time_point arrival;
  std::optional<Clock::time_point> first_scheduled;
  std::optional<Clock::time_point> first_token;
  std::optional<Clock::time_point> finished;

  // Samples the next token from this request's row of logits (modified in place): masked to what its grammar
  // allows, if it has one, which then advances. Touches only this request (and its grammar's locked caches).
  SampleResult SampleNext(std::span<float> logits);
  // The same, for the token after `output` (the output so far plus draft tokens accepted earlier in this step).
  SampleResult SampleNext(std::span<float> logits, std::span<const int32_t> output);

  // Whether SampleNext is ArgMax of the raw logits and nothing more: greedy, no grammar, no logit bias, no penalties,
  // no logprobs. A step of such requests only needs each row's argmax (ModelRunner::ExecuteArgMax).
  bool PicksArgMax() const;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  std::span<const int32_t> prompt() const { return std::span<const int32_t>(tokens).first(static_cast<size_t>(num_prompt_tokens)); }
  std::span<const int32_t> output() const { return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(num_prompt_tokens)); }
  bool is_finished() const { return status == RequestStatus::kFinished; }
  // What the prefix cache hashes the adapter as (0: base model).
  uint64_t adapter_salt() const { return adapter ? adapter->id : 0; }
};

}  // namespace parallm
