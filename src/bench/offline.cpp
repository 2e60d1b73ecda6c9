// Offline benchmark helpers: random prompts, one measured Generate() run.
#include "bench/offline.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <random>

namespace parallm::bench {

std::vector<std::vector<int32_t>> RandomPrompts(const Workload& w, int32_t vocab) {
  std::mt19937_64 rng(w.seed);
  const int32_t top = std::max(2, vocab - 256);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(w.prompts));
  for (auto& p : prompts)
    for (int32_t i = 0; i < w.input_len; ++i) p.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(top)));
  return prompts;
}

Result<std::vector<std::vector<int32_t>>> RetellPrompts(LLM& llm, const Workload& w) {
  constexpr int32_t kOpening = 4;
  Workload opening = w;
  opening.input_len = kOpening;
  std::vector<std::vector<int32_t>> prompts = RandomPrompts(opening, llm.model().config().vocab);
  SamplingParams params;
  params.max_tokens = std::max(1, w.input_len - 2 * kOpening);
  params.ignore_eos = true;
  PARALLM_ASSIGN_OR_RETURN(std::vector<Completion> documents, llm.Generate(prompts, {params}));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t> start = prompts[i];
    prompts[i].insert(prompts[i].end(), documents[i].ids().begin(), documents[i].ids().end());
    prompts[i].insert(prompts[i].end(), start.begin(), start.end());
  }
  return prompts;
}

boost::json::object RunFigures::ToJson() const {
  return {{"requests", requests},
          {"prompt_tokens", prompt_tokens},
          {"generated_tokens", generated_tokens},
          {"cached_tokens", cached_tokens},
          {"seconds", seconds},
          {"ttft_mean_s", ttft_mean},
          {"tpot_mean_s", tpot_mean},
          {"decode_tokens_per_s", decode_tps},
          {"decode_only_step_tokens_per_s", decode_only_tps},
          {"generation_tokens_per_s", generation_tps()},
          {"prompt_tokens_per_s", prompt_tps()},
          {"total_tokens_per_s", total_tps()},
          {"spec_draft_tokens", draft_tokens},
          {"spec_accepted_tokens", accepted_tokens}};
}

Result<RunFigures> Measure(LLM& llm, const std::vector<std::vector<int32_t>>& prompts, int32_t max_tokens,
                           const std::vector<std::shared_ptr<const LoraAdapter>>& adapters, float temperature,
                           std::vector<std::vector<int32_t>>* ids) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.temperature = temperature;
  p.seed = 1;
  p.has_seed = temperature > 0;
  const Scheduler::SpecStats spec_before = llm.engine().scheduler().spec_stats();
  const DecodeStepStats decode_before = llm.engine().decode_step_stats();
  const auto start = std::chrono::steady_clock::now();
  PARALLM_ASSIGN_OR_RETURN(std::vector<Completion> done, llm.Generate(prompts, {p}, nullptr, adapters));
  RunFigures f;
  const DecodeStepStats& decode_after = llm.engine().decode_step_stats();
  if (decode_after.seconds > decode_before.seconds)
    f.decode_only_tps = static_cast<double>(decode_after.tokens - decode_before.tokens) /
                        (decode_after.seconds - decode_before.seconds);
  f.draft_tokens = llm.engine().scheduler().spec_stats().num_draft_tokens - spec_before.num_draft_tokens;
  f.accepted_tokens = llm.engine().scheduler().spec_stats().num_accepted_tokens - spec_before.num_accepted_tokens;
  f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  f.requests = static_cast<int32_t>(done.size());
  int64_t tpot_n = 0;
  for (const Completion& c : done) {
    const Choice& ch = c.choices[0];
    if (ids != nullptr) ids->push_back(ch.ids);
    f.prompt_tokens += c.prompt_tokens;
    f.cached_tokens += c.cached_tokens;
    f.generated_tokens += static_cast<int64_t>(ch.ids.size());
    f.ttft_mean += ch.ttft_seconds;
    if (ch.ids.size() > 1) {
      f.tpot_mean += (ch.total_seconds - ch.ttft_seconds) / static_cast<double>(ch.ids.size() - 1);
      f.decode_tps += static_cast<double>(ch.ids.size() - 1) / std::max(ch.total_seconds - ch.ttft_seconds, 1e-9);
      ++tpot_n;
    }
  }
  if (f.requests > 0) f.ttft_mean /= f.requests;
  if (tpot_n > 0) f.tpot_mean /= static_cast<double>(tpot_n);
  return f;
}

int64_t PeakRssBytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

}  // namespace parallm::bench
