// Structured-output benchmark: simulated constrained requests over a schema corpus (mask cost per token) and the
// engine's aggregate decode rate with and without constraints.
#include "bench/structured_bench.h"

#include <chrono>
#include <cstdio>
#include <random>
#include <time.h>

#include "bench/offline.h"
#include "bench/stats.h"
#include "engine/sampler.h"
#include "structured/structured_output.h"

namespace parallm::bench {
namespace {

using Clock = std::chrono::steady_clock;

double MicrosSince(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

// This thread's CPU time in microseconds. The per-token figures use it: on a shared machine, wall time also
// counts the time the thread waited for a core, which says nothing about the mask.
double CpuMicros() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

boost::json::object SummaryJson(const std::vector<double>& v) {
  const Summary s = Summarize(v);
  return {{"count", s.count}, {"mean", s.mean}, {"median", s.median}, {"p90", s.p90}, {"p99", s.p99}, {"max", s.max}};
}

RunFigures Figures(const std::vector<Completion>& done, double seconds) {
  RunFigures f;
  f.seconds = seconds;
  f.requests = static_cast<int32_t>(done.size());
  int64_t n = 0;
  for (const Completion& c : done) {
    const Choice& ch = c.choices[0];
    f.prompt_tokens += c.prompt_tokens;
    f.generated_tokens += static_cast<int64_t>(ch.ids.size());
    f.ttft_mean += ch.ttft_seconds;
    if (ch.ids.size() > 1) {
      f.tpot_mean += (ch.total_seconds - ch.ttft_seconds) / static_cast<double>(ch.ids.size() - 1);
      f.decode_tps += static_cast<double>(ch.ids.size() - 1) / std::max(ch.total_seconds - ch.ttft_seconds, 1e-9);
      ++n;
    }
  }
  if (f.requests > 0) f.ttft_mean /= f.requests;
  if (n > 0) f.tpot_mean /= static_cast<double>(n);
  return f;
}

}  // namespace

Result<boost::json::object> RunMaskBenchmark(const Tokenizer& tokenizer, const std::vector<std::string>& schemas,
                                             const MaskBenchOptions& o) {
  const auto t0 = Clock::now();
  auto vocab = structured::TokenVocab::FromTokenizer(tokenizer, o.vocab_size);
  const double vocab_ms = MicrosSince(t0) / 1e3;
  std::vector<double> compile_ms, mask_us, apply_us, accept_us, step_us, cold_us, warm_us;
  std::vector<uint32_t> allowed(static_cast<size_t>(vocab->mask_words()));
  std::vector<float> logits(static_cast<size_t>(o.vocab_size));
  const std::vector<int32_t> eos = {tokenizer.eos_id()};
  std::mt19937_64 rng(o.seed);
  int completed = 0, walks = 0;
  for (const std::string& schema : schemas) {
    // A fresh compiler per schema: nothing cached from other schemas.
    structured::GrammarCompiler compiler(vocab);
    const double c0 = CpuMicros();
    auto grammar = compiler.Compile({structured::StructuredOutput::Kind::kJsonSchema, schema, {}, "", ""});
    if (!grammar.ok()) return grammar.status();
    compile_ms.push_back((CpuMicros() - c0) / 1e3);
    for (int w = 0; w < o.walks; ++w, ++walks) {
      structured::GrammarMatcher m(*grammar);
      for (int step = 0; step < o.max_steps; ++step) {
        double s0 = CpuMicros();
        m.FillMask(allowed, eos);
        const double mask = CpuMicros() - s0;
        for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 97);
        s0 = CpuMicros();
        ApplyTokenMask(logits, allowed);
        const double apply = CpuMicros() - s0;
        // A uniformly random allowed token (the mask's set bits), EOS when it is the only choice.
        std::vector<int32_t> choices;
        for (int32_t t = 0; t < o.vocab_size; ++t)
          if (allowed[static_cast<size_t>(t) >> 5] >> (t & 31) & 1) choices.push_back(t);
        if (choices.empty()) break;
        const int32_t token = choices[rng() % choices.size()];
        if (token == eos[0]) {
          ++completed;
          break;
        }
        s0 = CpuMicros();
        const bool ok = m.AcceptToken(token);
        const double accept = CpuMicros() - s0;
        if (!ok) return Err("internal: the matcher refused a token its own mask allowed");
        mask_us.push_back(mask);
        apply_us.push_back(apply);
        accept_us.push_back(accept);
        step_us.push_back(mask + apply + accept);
        (w == 0 ? cold_us : warm_us).push_back(mask + apply + accept);
        if (m.IsTerminated()) {
          ++completed;
          break;
        }
      }
    }
  }
  const Summary step = Summarize(step_us), mask = Summarize(mask_us), apply = Summarize(apply_us);
  const Summary cold = Summarize(cold_us), warm = Summarize(warm_us), compile = Summarize(compile_ms);
  std::printf("vocabulary: %d tokens (token bytes and trie built in %.0f ms)\n", o.vocab_size, vocab_ms);
  std::printf("%zu schemas, %d simulated requests (%d reached the end of their grammar), %zu tokens\n",
              schemas.size(), walks, completed, step_us.size());
  std::printf("%-28s %10s %10s %10s\n", "per token, per request", "median", "p99", "mean");
  std::printf("(thread CPU time in microseconds)\n");
  std::printf("%-28s %10.1f %10.1f %10.1f\n", "mask (us)", mask.median, mask.p99, mask.mean);
  std::printf("%-28s %10.1f %10.1f %10.1f\n", "apply to logits (us)", apply.median, apply.p99, apply.mean);
  std::printf("%-28s %10.1f %10.1f %10.1f\n", "mask+apply+advance (us)", step.median, step.p99, step.mean);
  std::printf("%-28s %10.1f %10.1f %10.1f\n", "  first request (cold)", cold.median, cold.p99, cold.mean);
  std::printf("%-28s %10.1f %10.1f %10.1f\n", "  later requests (warm)", warm.median, warm.p99, warm.mean);
  std::printf("%-28s %10.2f %10.2f %10.2f\n", "compile per schema (ms)", compile.median, compile.p99, compile.mean);
  return boost::json::object{{"benchmark", "structured-mask"},
                             {"vocab_size", o.vocab_size},
                             {"vocab_build_ms", vocab_ms},
                             {"schemas", schemas.size()},
                             {"walks", walks},
                             {"completed", completed},
                             {"steps", step_us.size()},
                             {"compile_ms", SummaryJson(compile_ms)},
                             {"mask_us", SummaryJson(mask_us)},
                             {"apply_us", SummaryJson(apply_us)},
                             {"accept_us", SummaryJson(accept_us)},
                             {"step_us", SummaryJson(step_us)},
                             {"cold_step_us", SummaryJson(cold_us)},
                             {"warm_step_us", SummaryJson(warm_us)}};
}

Result<boost::json::object> RunConstrainedDecodeBenchmark(LLM& llm, const Tokenizer& tokenizer,
                                                          const std::vector<std::string>& schemas,
                                                          const std::vector<std::vector<int32_t>>& prompts,
                                                          int32_t max_tokens) {
  const int32_t vocab_size = llm.model().config().vocab;
  structured::GrammarCompiler compiler(structured::TokenVocab::FromTokenizer(tokenizer, vocab_size));
  std::vector<SamplingParams> free(prompts.size()), constrained(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    // Both greedy: sampling at a temperature costs an exp per vocabulary entry, and far less where the mask left
    // -inf, which would hide the mask's cost. Greedy, the difference is the mask alone.
    free[i].max_tokens = max_tokens;
    free[i].ignore_eos = true;
    constrained[i].max_tokens = max_tokens;
    auto g = compiler.Compile({structured::StructuredOutput::Kind::kJsonSchema, schemas[i % schemas.size()], {}, "", ""});
    if (!g.ok()) return g.status();
    constrained[i].grammar = *g;
  }
  boost::json::object report{{"benchmark", "structured-decode"}, {"requests", prompts.size()}, {"max_tokens", max_tokens}};
  double tps[2] = {0, 0};
  std::printf("%-14s %9s %9s %10s %11s %9s\n", "run", "requests", "time s", "gen tok", "decode t/s", "tpot ms");
  // Constrained first; then each unconstrained request generates as many tokens as its constrained twin did, so
  // both runs have the same batch sizes step by step and differ by the mask alone.
  for (int run = 0; run < 2; ++run) {
    const auto start = Clock::now();
    PARALLM_ASSIGN_OR_RETURN(std::vector<Completion> done, llm.Generate(prompts, run == 0 ? constrained : free));
    const RunFigures f = Figures(done, MicrosSince(start) / 1e6);
    if (run == 0)
      for (size_t i = 0; i < done.size(); ++i)
        free[i].max_tokens = std::max<int32_t>(1, static_cast<int32_t>(done[i].choices[0].ids.size()));
    const char* name = run == 0 ? "constrained" : "unconstrained";
    std::printf("%-14s %9d %9.2f %10lld %11.1f %9.1f\n", name, f.requests, f.seconds,
                static_cast<long long>(f.generated_tokens), f.decode_tps, f.tpot_mean * 1e3);
    std::fflush(stdout);
    tps[run] = f.decode_tps;
    report[name] = f.ToJson();
  }
  report["decode_tps_ratio"] = tps[1] > 0 ? tps[0] / tps[1] : 0.0;
  std::printf("constrained / unconstrained aggregate decode: %.3f\n", tps[1] > 0 ? tps[0] / tps[1] : 0.0);
  return report;
}

}  // namespace parallm::bench
