// Offline benchmarks through the library (LLM::Generate): throughput, the continuous-batching sweep, and the
// prefix-cache and paged-cache reports. Each returns its figures as JSON and prints a readable table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "engine/llm.h"

namespace parallm::bench {

struct Workload {
  int32_t prompts = 32;
  int32_t input_len = 128;
  int32_t max_tokens = 64;
  uint64_t seed = 0;
};

// Random token prompts (as vLLM's random dataset), ids drawn below the vocabulary's top 256 (specials).
std::vector<std::vector<int32_t>> RandomPrompts(const Workload& w, int32_t vocab);

// Summarization-style prompts of about input_len tokens (a long prompt that the output copies from): a document the
// model writes itself (its greedy continuation of a random 4-token opening, ignoring end-of-sequence), then the
// opening again. A model that copies from its context retells the document.
Result<std::vector<std::vector<int32_t>>> RetellPrompts(LLM& llm, const Workload& w);

struct RunFigures {
  int32_t requests = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t cached_tokens = 0;
  double seconds = 0;
  double ttft_mean = 0;   // seconds
  double tpot_mean = 0;   // seconds per output token after the first
  // Sum over requests of (tokens after the first) / (time after the first token): the aggregate decode rate
  // while they run together, with the prefill excluded.
  double decode_tps = 0;
  // Tokens per second over the run's steps that carried no prefill (Engine::decode_step_stats): decode alone, not
  // slowed by other requests' prompt chunks in the same steps (0 if no step was pure decode).
  double decode_only_tps = 0;
  // Speculative decoding: draft tokens computed in the run, and of those accepted (0 when it is off).
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
  double generation_tps() const { return generated_tokens / seconds; }
  double prompt_tps() const { return prompt_tokens / seconds; }
  double total_tps() const { return (prompt_tokens + generated_tokens) / seconds; }
  boost::json::object ToJson() const;
};

// Runs `prompts` through `llm` (ignore_eos; greedy, or seeded sampling at `temperature` > 0) and measures it;
// `adapters` as LLM::Generate takes them; with `ids` set, also returns each request's output tokens.
Result<RunFigures> Measure(LLM& llm, const std::vector<std::vector<int32_t>>& prompts, int32_t max_tokens,
                           const std::vector<std::shared_ptr<const LoraAdapter>>& adapters = {}, float temperature = 0,
                           std::vector<std::vector<int32_t>>* ids = nullptr);

// Peak resident memory of this process, in bytes.
int64_t PeakRssBytes();

}  // namespace parallm::bench
