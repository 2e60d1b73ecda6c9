// `parallm bench`: offline throughput (the default), `bench batching` (1 vs N concurrent requests and a sweep),
// `bench speculative` (prompt lookup on vs off), `bench kv-cache-dtype` (f32, f16, bf16 and int8 caches: memory,
// fidelity, speed), `bench prefix-cache` (the seed's HIT/MISS table) and `bench paged-cache` (a shared system prompt
// with and without prefix sharing), `bench detok` (streaming detokenization) and `bench tokenize` (Encode MB/s, long inputs,
// tokenizers.js side by side), and `bench serve` (an online load client for any OpenAI-compatible server).
// Every command prints a table and can write JSON (--output); batching and serve can draw an SVG (--chart).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "bench/chart.h"
#include "bench/detok.h"
#include "bench/offline.h"
#include "bench/serve_client.h"
#include "bench/structured_bench.h"
#include "bench/tokenize_bench.h"
#include "chat/model_text.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/kv_cache_dtype_option.h"
#include "cli/speculative_option.h"
#include "engine/single_sequence.h"
#include "model/lora_writer.h"
#include "model/synthetic_model.h"
#include "util/mapped_file.h"
#include "util/progress.h"
#include "util/strings.h"

namespace parallm::cli {
namespace {

struct BenchOptions {
  std::string model = "synthetic:qwen2.5-0.5b";
  int prompts = 32, input_len = 128, max_tokens = 64, concurrency = 32, threads = 0, runs = 1;
  int max_concurrency = 32;
  int min_concurrency = 1;  // bench batching: first concurrency of the sweep
  int max_num_batched_tokens = 512;
  int max_model_len = 0;  // 0: the file's context (up to the engine's default)
  double kv_cache_gb = 2.0;
  std::optional<KvDtype> kv_cache_dtype;  // nullopt: auto (the model's type)
  std::string output;
  std::string chart;  // SVG file (bench batching)
  std::string tokenizer;
  SpeculativeConfig speculative;
  // bench batching: sequences spread over this many random LoRA adapters (0: base model only).
  int loras = 0;
  int lora_rank = 16;
  std::string lora_targets = "q,k,v,o,gate,up,down";
};

// `n` random adapters of rank `rank` on `targets` for the model's shape (what bench batching spreads sequences over).
Result<std::vector<std::shared_ptr<const LoraAdapter>>> BenchAdapters(const ModelConfig& c, int n, int rank,
                                                                      const std::string& targets) {
  RandomLoraSpec spec;
  spec.rank = rank;
  spec.targets.clear();
  for (const std::string& name : Split(targets, ',')) {
    bool found = false;
    for (int t = 0; t < kNumLoraTargets; ++t)
      if (name + "_proj" == LoraTargetHfName(static_cast<LoraTarget>(t)) || name == LoraTargetHfName(static_cast<LoraTarget>(t))) {
        spec.targets.push_back(static_cast<LoraTarget>(t));
        found = true;
      }
    if (!found) return Err("--lora-targets: {} is not one of q, k, v, o, gate, up, down", name);
  }
  if (rank <= 0) return Err("--lora-rank must be positive");
  std::vector<std::shared_ptr<const LoraAdapter>> out;
  for (int i = 0; i < n; ++i) {
    spec.seed = 1000 + static_cast<uint64_t>(i);
    out.push_back(std::make_shared<const LoraAdapter>(MakeRandomLora(c, spec)));
  }
  return out;
}

// Today's date in UTC, for reports and chart subtitles: "2026-11-30 17:20 UTC".
std::string NowUtc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M UTC", &tm);
  return text;
}

int WriteChart(const std::string& path, const std::string& svg) {
  if (path.empty()) return 0;
  Status st = bench::WriteSvg(path, svg);
  if (!st.ok()) return Fail(st.message());
  std::fprintf(stderr, "wrote %s\n", path.c_str());
  return 0;
}

EngineConfig Config(const BenchOptions& o, int max_seqs, bool prefix_caching = true) {
  EngineConfig c;
  c.kv_cache_gb = o.kv_cache_gb;
  c.kv_cache_dtype = o.kv_cache_dtype;
  c.threads = o.threads;
  c.enable_prefix_caching = prefix_caching;
  c.scheduler.max_num_seqs = max_seqs;
  c.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  c.scheduler.speculative = o.speculative;
  if (o.max_model_len > 0) c.scheduler.max_model_len = o.max_model_len;
  return c;
}

Result<std::unique_ptr<LLM>> Load(const BenchOptions& o, EngineConfig config) {
  if (IsSyntheticSpec(o.model)) std::fprintf(stderr, "building %s in memory...\n", o.model.c_str());
  PARALLM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelForCommand(o.model, o.max_model_len));
  if (config.scheduler.speculative.uses_draft_model() && IsSyntheticSpec(config.scheduler.speculative.model))
    std::fprintf(stderr, "building draft %s in memory...\n", config.scheduler.speculative.model.c_str());
  PARALLM_RETURN_IF_ERROR(LoadDraftModelFor(*model, &config));
  return std::make_unique<LLM>(std::move(model), config);
}

int WriteJson(const std::string& path, const boost::json::object& report) {
  if (path.empty()) return 0;
  std::ofstream out(path);
  out << boost::json::serialize(report) << '\n';
  if (!out) return Fail(fmt::format("{}: cannot write the JSON report", path));
  std::fprintf(stderr, "wrote %s\n", path.c_str());
  return 0;
}

boost::json::object Header(const BenchOptions& o, LLM& llm, const char* kind) {
  return {{"benchmark", kind},
          {"model", o.model},
          {"model_description", Describe(llm.model().config())},
          {"weights", llm.model().loaded().weight_types},
          {"threads", llm.engine().config().threads},
          {"kv_blocks", llm.engine().config().num_kv_blocks},
          {"kv_cache_dtype", KvDtypeName(llm.engine().kv_dtype())},
          {"block_size", llm.engine().config().block_size}};
}

int RunThroughput(const BenchOptions& o) {
  auto llm = Load(o, Config(o, o.concurrency));
  if (!llm.ok()) return Fail(llm.status().message());
  boost::json::object report = Header(o, **llm, "throughput");
  boost::json::array runs;
  std::printf("%-4s %7s %7s %9s %9s %9s %9s %10s %10s %10s\n", "run", "prompt", "gen", "time s", "ttft ms",
              "tpot ms", "gen tok/s", "prompt t/s", "total t/s", "peak mem");
  for (int run = 0; run < o.runs; ++run) {
    bench::Workload w{o.prompts, o.input_len, o.max_tokens, static_cast<uint64_t>(run)};
    auto f = bench::Measure(**llm, bench::RandomPrompts(w, (*llm)->model().config().vocab), o.max_tokens);
    if (!f.ok()) return Fail(f.status().message());
    std::printf("%-4d %7lld %7lld %9.2f %9.1f %9.1f %9.1f %10.1f %10.1f %10s\n", run + 1,
                static_cast<long long>(f->prompt_tokens), static_cast<long long>(f->generated_tokens), f->seconds,
                f->ttft_mean * 1e3, f->tpot_mean * 1e3, f->generation_tps(), f->prompt_tps(), f->total_tps(),
                HumanBytes(static_cast<double>(bench::PeakRssBytes())).c_str());
    std::printf("     decode tok/s: %.1f per request summed, %.1f in steps without prefill\n", f->decode_tps,
                f->decode_only_tps);
    if (o.speculative.enabled())
      std::printf("     speculative decoding: %lld of %lld draft tokens accepted (%.1f%%)\n",
                  static_cast<long long>(f->accepted_tokens), static_cast<long long>(f->draft_tokens),
                  f->draft_tokens > 0 ? 100.0 * static_cast<double>(f->accepted_tokens) / f->draft_tokens : 0.0);
    runs.push_back(f->ToJson());
  }
  report["runs"] = runs;
  report["concurrency"] = o.concurrency;
  report["peak_memory_bytes"] = bench::PeakRssBytes();
  return WriteJson(o.output, report);
}

int RunBatching(const BenchOptions& o) {
  auto llm = Load(o, Config(o, o.max_concurrency));
  if (!llm.ok()) return Fail(llm.status().message());
  const int32_t vocab = (*llm)->model().config().vocab;
  boost::json::object report = Header(o, **llm, "batching");
  boost::json::array sweep;
  std::vector<std::shared_ptr<const LoraAdapter>> adapters;
  if (o.loras > 0) {
    auto made = BenchAdapters((*llm)->model().config(), o.loras, o.lora_rank, o.lora_targets);
    if (!made.ok()) return Fail(made.status().message());
    adapters = std::move(*made);
    report["loras"] = o.loras;
    report["lora_rank"] = o.lora_rank;
    report["lora_targets"] = o.lora_targets;
  }
  {
    // What each request holds in the cache at its end: KV for every token of context (attention layers), and for a
    // hybrid model a recurrent state of fixed size (Mamba layers), however long the request.
    const ModelConfig& mc = (*llm)->model().config();
    const int64_t kv = KvBytesPerToken(mc, (*llm)->engine().kv_dtype()) * (o.input_len + o.max_tokens);
    const int64_t state = StateBytesPerSequence(mc);
    std::printf("memory per request (%d prompt + %d output tokens): KV %s, recurrent state %s\n", o.input_len,
                o.max_tokens, HumanBytes(static_cast<double>(kv)).c_str(), HumanBytes(static_cast<double>(state)).c_str());
    report["kv_bytes_per_request"] = kv;
    report["state_bytes_per_request"] = state;
  }
  std::printf("%11s %9s %9s %10s %11s %9s %8s%s\n", "concurrency", "requests", "time s", "gen tok/s", "decode t/s",
              "speedup", "ttft s", o.loras > 0 ? "  lora decode t/s  lora/base" : "");
  double single = 0;
  bench::LineSeries generation{"generation tok/s (all tokens / wall time)", {}, {}};
  bench::LineSeries decode{"aggregate decode tok/s (prefill excluded)", {}, {}};
  for (int c = std::max(1, o.min_concurrency); c <= o.max_concurrency; c *= 2) {
    // c requests at once, each max_tokens long: the engine runs them as one batch of c sequences.
    bench::Workload w{c, o.input_len, o.max_tokens, static_cast<uint64_t>(c)};
    auto f = bench::Measure(**llm, bench::RandomPrompts(w, vocab), o.max_tokens);
    if (!f.ok()) return Fail(f.status().message());
    if (single == 0) single = f->generation_tps();  // the speedup is against the sweep's first row
    std::printf("%11d %9d %9.2f %10.1f %11.1f %8.2fx %8.2f", c, f->requests, f->seconds, f->generation_tps(),
                f->decode_tps, f->generation_tps() / single, f->ttft_mean);
    boost::json::object row = f->ToJson();
    if (!adapters.empty()) {
      // The same prompts, request i with adapter i % loras: every step mixes the adapters.
      std::vector<std::shared_ptr<const LoraAdapter>> spread;
      for (int i = 0; i < c; ++i) spread.push_back(adapters[static_cast<size_t>(i) % adapters.size()]);
      auto fl = bench::Measure(**llm, bench::RandomPrompts(w, vocab), o.max_tokens, spread);
      if (!fl.ok()) return Fail(fl.status().message());
      std::printf(" %17.1f %10.3f", fl->decode_tps, fl->decode_tps / f->decode_tps);
      row["lora"] = fl->ToJson();
      row["lora_over_base_decode"] = fl->decode_tps / f->decode_tps;
    }
    std::printf("\n");
    row["concurrency"] = c;
    row["speedup"] = f->generation_tps() / single;
    sweep.push_back(row);
    generation.x.push_back(c);
    generation.y.push_back(f->generation_tps());
    decode.x.push_back(c);
    decode.y.push_back(f->decode_tps);
    std::fflush(stdout);
  }
  report["sweep"] = sweep;
  if (!o.chart.empty()) {
    bench::LineChart chart;
    chart.title = "parallm bench batching: throughput vs concurrent requests";
    const int threads = (*llm)->engine().config().threads;
    chart.subtitle = fmt::format("{} · {} · {}-token prompts, {} output tokens each · {}", o.model,
                                 threads > 0 ? fmt::format("{} threads", threads)
                                             : fmt::format("all {} cores", std::thread::hardware_concurrency()),
                                 o.input_len, o.max_tokens, NowUtc());
    chart.x_label = "concurrent requests";
    chart.y_label = "tokens/s";
    chart.log2_x = true;
    chart.series = {generation, decode};
    if (int rc = WriteChart(o.chart, bench::RenderLineChart(chart)); rc != 0) return rc;
  }
  return WriteJson(o.output, report);
}

// The same prompts with and without drafts (prompt lookup or a draft model), in one process: decode speed, acceptance,
// and whether the outputs are identical (they must be: drafting changes the work, not the tokens). `workload`:
// "random" prompts, or "retell" (summarization-style: the model's own document, then its opening again).
int RunSpeculative(const BenchOptions& o, float temperature, const std::string& workload) {
  BenchOptions plain_options = o, drafted_options = o;
  plain_options.speculative = {};
  if (!drafted_options.speculative.enabled()) drafted_options.speculative.num_speculative_tokens = 4;
  auto plain = Load(plain_options, Config(plain_options, o.concurrency));
  if (!plain.ok()) return Fail(plain.status().message());
  auto drafted = Load(drafted_options, Config(drafted_options, o.concurrency));
  if (!drafted.ok()) return Fail(drafted.status().message());
  boost::json::object report = Header(o, **drafted, "speculative");
  const SpeculativeConfig& spec = drafted_options.speculative;
  const bool model_drafts = spec.uses_draft_model();
  const std::string method =
      model_drafts ? fmt::format("draft model {} ({})", spec.model, Describe((*drafted)->engine().config().draft_model->config()))
                   : fmt::format("prompt lookup ({}-{}-token n-grams)", spec.prompt_lookup_min, spec.prompt_lookup_max);
  std::printf("%s: up to %d draft tokens; %d %s requests of %d prompt tokens, %d out, %s\n", method.c_str(),
              spec.num_speculative_tokens, o.prompts, workload.c_str(), o.input_len, o.max_tokens,
              temperature > 0 ? fmt::format("temperature {} (seeded)", temperature).c_str() : "greedy");
  report["method"] = model_drafts ? "draft_model" : "ngram";
  if (model_drafts) report["draft_model"] = spec.model;
  report["num_speculative_tokens"] = spec.num_speculative_tokens;
  report["workload"] = workload;
  std::printf("%-4s %-14s %11s %9s %10s %9s %9s\n", "run", "drafts", "decode t/s", "tpot ms", "accepted", "speedup",
              "same out");
  boost::json::array runs;
  bool all_same = true;
  for (int run = 0; run < o.runs; ++run) {
    bench::Workload w{o.prompts, o.input_len, o.max_tokens, static_cast<uint64_t>(run)};
    std::vector<std::vector<int32_t>> prompts;
    if (workload == "retell") {
      auto retell = bench::RetellPrompts(**plain, w);
      if (!retell.ok()) return Fail(retell.status().message());
      prompts = std::move(*retell);
    } else {
      prompts = bench::RandomPrompts(w, (*plain)->model().config().vocab);
    }
    std::vector<std::vector<int32_t>> plain_ids, drafted_ids;
    auto off = bench::Measure(**plain, prompts, o.max_tokens, {}, temperature, &plain_ids);
    if (!off.ok()) return Fail(off.status().message());
    auto on = bench::Measure(**drafted, prompts, o.max_tokens, {}, temperature, &drafted_ids);
    if (!on.ok()) return Fail(on.status().message());
    const bool same = plain_ids == drafted_ids;
    all_same = all_same && same;
    const double acceptance = on->draft_tokens > 0 ? static_cast<double>(on->accepted_tokens) / on->draft_tokens : 0;
    std::printf("%-4d %-14s %11.1f %9.1f %10s %9s %9s\n", run + 1, "none", off->decode_tps, off->tpot_mean * 1e3, "-",
                "1.00x", "");
    std::printf("%-4d %-14s %11.1f %9.1f %9.1f%% %8.2fx %9s\n", run + 1, model_drafts ? "draft model" : "prompt lookup",
                on->decode_tps,
                on->tpot_mean * 1e3, 100 * acceptance, on->decode_tps / std::max(off->decode_tps, 1e-9),
                same ? "yes" : "NO");
    std::fflush(stdout);
    boost::json::object row;
    row["without"] = off->ToJson();
    row["with"] = on->ToJson();
    row["acceptance"] = acceptance;
    row["speedup"] = on->decode_tps / std::max(off->decode_tps, 1e-9);
    row["same_output"] = same;
    runs.push_back(row);
  }
  report["runs"] = runs;
  report["temperature"] = temperature;
  if (int rc = WriteJson(o.output, report); rc != 0) return rc;
  if (!all_same) return Fail("the outputs with drafts differ from those without: a bug, please report it");
  return 0;
}

// How far the logits with a 16-bit or int8 KV cache are from those with the f32 cache, over one sequence.
struct KvFidelity {
  double max_error = 0;   // the largest |logit - f32 logit| at a position, over the f32 logits' spread (max - min)
  double mean_error = 0;  // that ratio's mean over positions
  double top1_agreement = 0;
};

// Teacher-forces `tokens` through the model with the cache in `dtype` and compares every position's logits with
// `exact`, those of the f32 cache.
KvFidelity MeasureKvFidelity(Model& model, const std::vector<int32_t>& tokens, const std::vector<float>& exact,
                             KvDtype dtype, ThreadPool* pool) {
  const int n = static_cast<int>(tokens.size());
  const int vocab = model.config().vocab;
  const std::vector<float> stored = SingleSequence(model, n, pool, dtype).Append(tokens, /*all_logits=*/true);
  KvFidelity f;
  int agree = 0;
  for (int p = 0; p < n; ++p) {
    const float* a = exact.data() + static_cast<size_t>(p) * vocab;
    const float* b = stored.data() + static_cast<size_t>(p) * vocab;
    const auto [lo, hi] = std::minmax_element(a, a + vocab);
    double worst = 0;
    for (int v = 0; v < vocab; ++v) worst = std::max(worst, static_cast<double>(std::fabs(a[v] - b[v])));
    const double ratio = worst / std::max(1e-12, static_cast<double>(*hi - *lo));
    f.max_error = std::max(f.max_error, ratio);
    f.mean_error += ratio / n;
    agree += std::max_element(a, a + vocab) - a == std::max_element(b, b + vocab) - b;
  }
  f.top1_agreement = static_cast<double>(agree) / n;
  return f;
}

int RunKvCacheDtype(const BenchOptions& o) {
  boost::json::object report;
  boost::json::array rows;
  std::vector<int32_t> sequence;  // a prompt and the f32 cache's greedy continuation of it
  std::vector<float> exact;       // its logits at every position with the f32 cache
  double f32_tps = 0;
  for (KvDtype dtype : kKvDtypes) {
    BenchOptions typed = o;
    typed.kv_cache_dtype = dtype;
    auto llm = Load(typed, Config(typed, o.concurrency));
    if (!llm.ok()) return Fail(llm.status().message());
    if (dtype == KvDtype::kF32) {
      report = Header(o, **llm, "kv-cache-dtype");
      std::printf("%d requests of %d prompt tokens, %d out, %d at once; fidelity over one %d-token sequence\n", o.prompts,
                  o.input_len, o.max_tokens, o.concurrency, o.input_len + o.max_tokens);
      // decode t/s: each request's rate summed; no-prefill t/s: the steps that carry no prompt chunk, where the cache
      // type shows most (what llama-batched-bench counts).
      std::printf("%-8s %12s %14s %15s %12s %11s %8s %15s\n", "kv cache", "bytes/token", "max err/spread",
                  "mean err/spread", "top-1 agree", "decode t/s", "vs f32", "no-prefill t/s");
      std::vector<std::vector<int32_t>> ids;
      const auto prompt = bench::RandomPrompts(bench::Workload{1, o.input_len, o.max_tokens, 11}, (*llm)->model().config().vocab);
      auto greedy = bench::Measure(**llm, prompt, o.max_tokens, {}, 0.0f, &ids);
      if (!greedy.ok()) return Fail(greedy.status().message());
      sequence = prompt[0];
      sequence.insert(sequence.end(), ids[0].begin(), ids[0].end());
    }
    KvFidelity fidelity;
    ThreadPool pool(o.threads);
    if (dtype == KvDtype::kF32) {
      SingleSequence whole((*llm)->model(), static_cast<int>(sequence.size()), &pool);
      exact = whole.Append(sequence, /*all_logits=*/true);
      fidelity.top1_agreement = 1;
    } else {
      fidelity = MeasureKvFidelity((*llm)->model(), sequence, exact, dtype, &pool);
    }
    bench::Workload w{o.prompts, o.input_len, o.max_tokens, 5};
    auto figures = bench::Measure(**llm, bench::RandomPrompts(w, (*llm)->model().config().vocab), o.max_tokens);
    if (!figures.ok()) return Fail(figures.status().message());
    if (dtype == KvDtype::kF32) f32_tps = figures->decode_tps;
    const KvStorageShape shape = (*llm)->model().KvShape(1, (*llm)->engine().config().block_size, dtype);
    const double bytes_per_token = static_cast<double>(PagedKvStorage::BytesPerBlock(shape)) / shape.block_size;
    std::printf("%-8s %12.0f %14.2e %15.2e %11.1f%% %11.1f %7.2fx %15.1f\n", std::string(KvDtypeName(dtype)).c_str(),
                bytes_per_token, fidelity.max_error, fidelity.mean_error, 100 * fidelity.top1_agreement,
                figures->decode_tps, figures->decode_tps / std::max(f32_tps, 1e-9), figures->decode_only_tps);
    std::fflush(stdout);
    rows.push_back({{"kv_cache_dtype", KvDtypeName(dtype)},
                    {"bytes_per_token", bytes_per_token},
                    {"max_error_over_spread", fidelity.max_error},
                    {"mean_error_over_spread", fidelity.mean_error},
                    {"top1_agreement", fidelity.top1_agreement},
                    {"figures", figures->ToJson()}});
  }
  report["rows"] = rows;
  return WriteJson(o.output, report);
}

int RunPrefixCache(const BenchOptions& o) {
  auto llm = Load(o, Config(o, 32));
  if (!llm.ok()) return Fail(llm.status().message());
  const int32_t vocab = (*llm)->model().config().vocab;
  auto prompts = bench::RandomPrompts(bench::Workload{2, o.input_len, 1, 42}, vocab);
  const std::vector<std::vector<int32_t>>& a = {prompts[0]};
  const std::vector<std::vector<int32_t>>& b = {prompts[1]};
  struct StepSpec {
    const char* label;
    const std::vector<std::vector<int32_t>>* prompt;
  };
  const StepSpec steps[] = {{"first prompt", &a}, {"same prompt", &a}, {"different prompt", &b}, {"first prompt again", &a}};
  boost::json::object report = Header(o, **llm, "prefix-cache");
  boost::json::array rows;
  std::printf("%-20s %8s %8s %10s %9s\n", "request", "result", "cached", "ttft ms", "prompt");
  double cold_ttft = 0, warm_ttft = 0;
  for (const StepSpec& s : steps) {
    auto f = bench::Measure(**llm, *s.prompt, o.max_tokens);
    if (!f.ok()) return Fail(f.status().message());
    const char* result = f->cached_tokens == 0 ? "MISS" : (f->cached_tokens + 16 >= f->prompt_tokens ? "HIT" : "PREFIX_HIT");
    std::printf("%-20s %8s %8lld %10.1f %9lld\n", s.label, result, static_cast<long long>(f->cached_tokens),
                f->ttft_mean * 1e3, static_cast<long long>(f->prompt_tokens));
    if (std::string(s.label) == "first prompt") cold_ttft = f->ttft_mean;
    if (std::string(s.label) == "same prompt") warm_ttft = f->ttft_mean;
    boost::json::object row = f->ToJson();
    row["request"] = s.label;
    row["result"] = result;
    rows.push_back(row);
  }
  const KVCacheStats& st = (*llm)->engine().kv_manager().stats();
  const double hit_rate = st.query_tokens > 0 ? static_cast<double>(st.hit_tokens) / st.query_tokens : 0;
  std::printf("hit rate %.1f%% of prompt tokens, %lld tokens saved, cached TTFT %.1fx sooner than cold\n",
              hit_rate * 100, static_cast<long long>(st.hit_tokens), cold_ttft / std::max(warm_ttft, 1e-9));
  report["steps"] = rows;
  report["hits"] = st.hits;
  report["partial_hits"] = st.partial_hits;
  report["misses"] = st.misses;
  report["hit_rate"] = hit_rate;
  report["tokens_saved"] = st.hit_tokens;
  report["ttft_speedup"] = cold_ttft / std::max(warm_ttft, 1e-9);
  return WriteJson(o.output, report);
}

int RunPagedCache(const BenchOptions& o) {
  boost::json::object report{{"benchmark", "paged-cache"}, {"model", o.model}};
  boost::json::array modes;
  std::printf("%-16s %9s %10s %9s %9s %7s %11s %12s\n", "mode", "time s", "tok/s", "allocated", "shared", "hits",
              "tokens saved", "memory saved");
  for (bool sharing : {false, true}) {
    auto llm = Load(o, Config(o, 16, sharing));
    if (!llm.ok()) return Fail(llm.status().message());
    const int32_t vocab = (*llm)->model().config().vocab;
    // 20 requests in 2 rounds of 10, each a ~286-token system prompt followed by its own question.
    auto system = bench::RandomPrompts(bench::Workload{1, 286, 1, 7}, vocab)[0];
    auto questions = bench::RandomPrompts(bench::Workload{20, 24, 1, 8}, vocab);
    bench::RunFigures total;
    for (int round = 0; round < 2; ++round) {
      std::vector<std::vector<int32_t>> batch;
      for (int i = 0; i < 10; ++i) {
        batch.push_back(system);
        const auto& q = questions[static_cast<size_t>(round * 10 + i)];
        batch.back().insert(batch.back().end(), q.begin(), q.end());
      }
      auto f = bench::Measure(**llm, batch, o.max_tokens);
      if (!f.ok()) return Fail(f.status().message());
      total.requests += f->requests;
      total.prompt_tokens += f->prompt_tokens;
      total.generated_tokens += f->generated_tokens;
      total.cached_tokens += f->cached_tokens;
      total.seconds += f->seconds;
    }
    const KVCacheStats& st = (*llm)->engine().kv_manager().stats();
    const double block_bytes =
        static_cast<double>(PagedKvStorage::BytesPerBlock((*llm)->model().KvShape(
            1, (*llm)->engine().config().block_size, (*llm)->engine().kv_dtype())));
    const double saved = static_cast<double>(st.blocks_shared) * block_bytes;
    std::printf("%-16s %9.2f %10.1f %9lld %9lld %7lld %11lld %12s\n", sharing ? "prefix sharing" : "no sharing",
                total.seconds, total.total_tps(), static_cast<long long>(st.blocks_allocated),
                static_cast<long long>(st.blocks_shared), static_cast<long long>(st.hits + st.partial_hits),
                static_cast<long long>(st.hit_tokens), HumanBytes(saved).c_str());
    boost::json::object row = total.ToJson();
    row["prefix_sharing"] = sharing;
    row["blocks_allocated"] = st.blocks_allocated;
    row["blocks_shared"] = st.blocks_shared;
    row["hits"] = st.hits + st.partial_hits;
    row["tokens_saved"] = st.hit_tokens;
    row["memory_saved_bytes"] = saved;
    modes.push_back(row);
  }
  report["modes"] = modes;
  return WriteJson(o.output, report);
}

int RunDetok(const BenchOptions& o) {
  auto text = ModelText::ForModel(o.tokenizer.empty() ? o.model : o.tokenizer, o.tokenizer);
  if (!text.ok()) return Fail(text.status().message());
  if (!text->has_tokenizer()) return Fail(text->missing() + " (pass --tokenizer)");
  boost::json::object report = bench::RunDetokBenchmark(*text->tokenizer(), {8, 100, 500, 1000, 2000, 4000}, 3);
  report["tokenizer"] = o.tokenizer.empty() ? o.model : o.tokenizer;
  return WriteJson(o.output, report);
}

struct TokenizeBenchCli {
  std::string text_file;  // empty: bench::EnglishText(bytes)
  size_t bytes = 1 << 20, chars = 100000;
  int repeats = 3;
  bool reference = false, reference_long = false;
  std::string reference_script = "tests/tokenizer/node/bench.mjs";
};

int RunTokenize(const BenchOptions& o, const TokenizeBenchCli& t) {
  auto model_text = ModelText::ForModel(o.tokenizer, o.tokenizer);
  if (!model_text.ok()) return Fail(model_text.status().message());
  if (!model_text->has_tokenizer()) return Fail(model_text->missing());
  std::string text = bench::EnglishText(t.bytes);
  if (!t.text_file.empty()) {
    auto file = ReadTextFile(t.text_file);
    if (!file.ok()) return Fail(file.status().message());
    text = std::move(file).value();
  }
  bench::TokenizeBenchOptions options;
  options.repeats = t.repeats;
  options.no_space_bytes = t.bytes;
  options.repeat_chars = t.chars;
  options.load_fresh = [path = o.tokenizer]() -> Result<Tokenizer> {
    auto fresh = ModelText::ForModel(path, path);
    if (!fresh.ok()) return fresh.status();
    if (!fresh->has_tokenizer()) return Err("{}", fresh->missing());
    return *fresh->tokenizer();
  };
  if (t.reference || t.reference_long) {
    options.reference_script = t.reference_script;
    options.reference_long = t.reference_long;
    const bool folder = std::filesystem::is_directory(o.tokenizer);
    options.reference_tokenizer_json = folder ? (std::filesystem::path(o.tokenizer) / "tokenizer.json").string() : o.tokenizer;
  }
  boost::json::object report = bench::RunTokenizeBenchmark(*model_text->tokenizer(), text, options);
  report["tokenizer"] = o.tokenizer;
  report["text"] = t.text_file.empty() ? "generated English prose" : t.text_file;
  return WriteJson(o.output, report);
}

// `bench serve`'s options; names and defaults as `vllm bench serve`'s.
struct ServeCli {
  std::string base_url = "http://127.0.0.1:8000";
  std::string api_key;  // default: $OPENAI_API_KEY, as the OpenAI clients and vLLM's benchmark read it
  std::string endpoint = "/v1/completions";
  std::string model;  // empty: the first id of GET /v1/models
  int num_prompts = 1000;
  std::string request_rate = "inf";
  int max_concurrency = 0;
  int random_input_len = 1024, random_output_len = 128, random_prefix_len = 0;
  double random_range_ratio = 0;
  int random_vocab_size = 32000;
  std::string dataset_path;  // ShareGPT JSON; empty: the random dataset
  int sharegpt_output_len = 0;
  std::string tokenizer;
  int ignore_eos = 0;  // CLI11 flag count: > 0 --ignore-eos, < 0 --no-ignore-eos, 0 the default
  uint64_t seed = 0;
  double timeout = 600;
  double ready_check_timeout = 0;  // seconds to wait for the server to come up; 0: it must be up
  std::string output, chart;
};

bench::BarChart ServeChart(const ServeCli& s, const std::string& model, const bench::ServeReport& r) {
  bench::BarChart chart;
  chart.title = fmt::format("parallm bench serve: {} requests ({} failed), {:.1f} output tok/s, {:.2f} req/s",
                            r.completed + r.failed, r.failed, r.output_throughput(), r.request_throughput());
  const std::string rate = s.request_rate == "inf" ? "all at once" : s.request_rate + " req/s";
  const std::string workload =
      s.dataset_path.empty() ? fmt::format("random {}/{} tokens", s.random_input_len, s.random_output_len) : "ShareGPT";
  chart.subtitle = fmt::format("{} at {} · {} · {}{} · {}", model, s.base_url, workload, rate,
                               s.max_concurrency > 0 ? fmt::format(", at most {} in flight", s.max_concurrency) : "",
                               NowUtc());
  chart.y_label = "milliseconds";
  chart.series = {"mean", "median", "p99"};
  auto group = [](const char* label, const bench::Summary& x) {
    return bench::BarGroup{label, {x.mean * 1e3, x.median * 1e3, x.p99 * 1e3}};
  };
  chart.groups = {group("TTFT (time to first token)", r.ttft), group("TPOT (per output token)", r.tpot),
                  group("ITL (inter-token gap)", r.itl), group("E2E latency", r.e2e)};
  return chart;
}

int RunServe(const ServeCli& s) {
  auto url = bench::ParseBaseUrl(s.base_url);
  if (!url.ok()) return Fail(url.status().message());
  if (s.num_prompts < 1) return Fail("--num-prompts must be at least 1");
  bench::ServeOptions options;
  options.url = *url;
  options.url.api_key = s.api_key;
  if (const char* env = std::getenv("OPENAI_API_KEY"); env && s.api_key.empty()) options.url.api_key = env;
  options.endpoint = s.endpoint.starts_with('/') ? s.endpoint : "/" + s.endpoint;
  options.max_concurrency = s.max_concurrency;
  options.seed = s.seed;
  options.timeout_s = s.timeout;
  if (s.request_rate != "inf") {
    char* end = nullptr;
    options.request_rate = std::strtod(s.request_rate.c_str(), &end);
    if (end == s.request_rate.c_str() || *end != '\0' || !(options.request_rate > 0))
      return Fail(fmt::format("--request-rate: expected a positive number or inf, got '{}'", s.request_rate));
  }
  std::optional<ModelText> text;
  if (!s.tokenizer.empty()) {
    auto loaded = ModelText::ForModel(s.tokenizer, s.tokenizer);
    if (!loaded.ok()) return Fail(loaded.status().message());
    if (!loaded->has_tokenizer()) return Fail(s.tokenizer + ": " + loaded->missing());
    text = std::move(loaded).value();
    options.tokenizer = text->tokenizer();
  }
  const bool random = s.dataset_path.empty();
  if (random && options.chat() && !options.tokenizer)
    return Fail("random prompts for " + options.endpoint + " are text: pass --tokenizer (or use /v1/completions)");
  options.ignore_eos = s.ignore_eos != 0 ? s.ignore_eos > 0 : random;

  if (s.ready_check_timeout > 0) {
    Status ready = bench::WaitForServer(options.url, s.ready_check_timeout);
    if (!ready.ok()) return Fail(ready.message());
  }
  std::string model = s.model;
  if (model.empty()) {
    auto first = bench::FirstServedModel(options.url, std::min(s.timeout, 30.0));
    if (!first.ok()) return Fail(first.status().message());
    model = std::move(first).value();
  }
  options.model = model;

  std::vector<bench::ServeRequest> requests;
  if (random) {
    bench::RandomDatasetOptions r;
    r.num_prompts = s.num_prompts;
    r.input_len = s.random_input_len;
    r.output_len = s.random_output_len;
    r.range_ratio = s.random_range_ratio;
    r.prefix_len = s.random_prefix_len;
    r.vocab = s.random_vocab_size;
    r.seed = s.seed;
    requests = bench::RandomDataset(r, options.tokenizer);
  } else {
    auto loaded = bench::ShareGptDataset(s.dataset_path, {s.num_prompts, s.sharegpt_output_len, s.seed}, options.tokenizer);
    if (!loaded.ok()) return Fail(loaded.status().message());
    requests = std::move(loaded).value();
  }
  std::printf("bench serve: %zu requests to %s%s, model %s, %s, request rate %s, max concurrency %s\n", requests.size(),
              options.url.ToString().c_str(), options.endpoint.c_str(), model.c_str(),
              random ? fmt::format("random {}+{} in, {} out", s.random_prefix_len, s.random_input_len, s.random_output_len).c_str()
                     : s.dataset_path.c_str(),
              s.request_rate.c_str(), s.max_concurrency > 0 ? std::to_string(s.max_concurrency).c_str() : "none");
  std::fflush(stdout);

  auto report = bench::RunServeBenchmark(options, requests);
  if (!report.ok()) return Fail(report.status().message());
  report->Print();

  boost::json::object json{{"benchmark", "serve"},
                           {"date", NowUtc()},
                           {"backend", options.chat() ? "openai-chat" : "openai"},
                           {"base_url", options.url.ToString()},
                           {"endpoint", options.endpoint},
                           {"model_id", model},
                           {"tokenizer_id", s.tokenizer},
                           {"dataset", random ? "random" : "sharegpt"},
                           {"dataset_path", s.dataset_path},
                           {"num_prompts", static_cast<int64_t>(requests.size())},
                           {"max_concurrency", s.max_concurrency > 0 ? boost::json::value(s.max_concurrency) : nullptr},
                           {"ignore_eos", options.ignore_eos},
                           {"seed", s.seed},
                           {"first_error", report->first_error}};
  if (std::isfinite(options.request_rate))
    json["request_rate"] = options.request_rate;
  else
    json["request_rate"] = "inf";  // as vLLM writes it: JSON has no infinity
  if (random) {
    json["random_input_len"] = s.random_input_len;
    json["random_output_len"] = s.random_output_len;
    json["random_prefix_len"] = s.random_prefix_len;
    json["random_range_ratio"] = s.random_range_ratio;
  }
  for (auto& [key, value] : report->ToJson()) json[key] = value;
  if (int rc = WriteJson(s.output, json); rc != 0) return rc;
  if (int rc = WriteChart(s.chart, bench::RenderBarChart(ServeChart(s, model, *report))); rc != 0) return rc;
  if (report->completed == 0) return Fail("every request failed; the first: " + report->first_error);
  return 0;
}

struct StructuredCli {
  std::string corpus = "tests/structured/schema_corpus.jsonl";
  int steps = 64;
  int walks = 2;
  int requests = 64;
  bool skip_decode = false;
};

int RunStructured(const BenchOptions& o, const StructuredCli& s) {
  // The corpus: one {"name", "schema"} per line (tests/structured/schema_corpus.jsonl).
  std::ifstream in(s.corpus);
  if (!in) return Fail(fmt::format("{}: cannot read the schema corpus", s.corpus));
  std::vector<std::string> schemas;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(line, ec);
    if (ec || !v.is_object() || !v.as_object().contains("schema"))
      return Fail(fmt::format("{}: line {} is not {{\"name\", \"schema\"}}", s.corpus, schemas.size() + 1));
    schemas.push_back(boost::json::serialize(v.as_object().at("schema")));
  }
  auto text = LoadModelTextForCommand(o.model, o.tokenizer, "");
  if (!text.ok()) return Fail(text.status().message());
  if (!text->has_tokenizer()) return Fail("bench structured needs a tokenizer (--tokenizer)");
  boost::json::object report;
  std::unique_ptr<LLM> llm;
  int32_t vocab = text->tokenizer()->size();
  if (!s.skip_decode) {
    // No prefix cache: the second run must not find the first run's prompts computed.
    auto loaded = Load(o, Config(o, s.requests, /*prefix_caching=*/false));
    if (!loaded.ok()) return Fail(loaded.status().message());
    llm = std::move(*loaded);
    vocab = llm->model().config().vocab;
    report = Header(o, *llm, "structured");
  }
  bench::MaskBenchOptions mo;
  mo.vocab_size = vocab;
  mo.max_steps = s.steps;
  mo.walks = s.walks;
  auto masks = bench::RunMaskBenchmark(*text->tokenizer(), schemas, mo);
  if (!masks.ok()) return Fail(masks.status().message());
  report["mask"] = *masks;
  if (llm) {
    bench::Workload w{s.requests, o.input_len, o.max_tokens, 7};
    auto decode = bench::RunConstrainedDecodeBenchmark(*llm, *text->tokenizer(), schemas,
                                                        bench::RandomPrompts(w, vocab), o.max_tokens);
    if (!decode.ok()) return Fail(decode.status().message());
    report["decode"] = *decode;
  }
  return WriteJson(o.output, report);
}

void AddModelOptions(CLI::App* cmd, BenchOptions& o) {
  cmd->add_option("-m,--model", o.model, "Model file/folder, or synthetic:PRESET[:TYPE] built in memory")
      ->capture_default_str();
  cmd->add_option("--input-len", o.input_len, "Prompt tokens per request")->capture_default_str();
  cmd->add_option("--max-tokens", o.max_tokens, "Generated tokens per request")->capture_default_str();
  cmd->add_option("-t,--threads", o.threads, "Threads (default: all cores)");
  cmd->add_option("--kv-cache-gb", o.kv_cache_gb, "KV cache size in GiB")->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o.max_num_batched_tokens, "Tokens per engine step")->capture_default_str();
  AddMaxModelLenOption(cmd, &o.max_model_len);
  AddSpeculativeOption(cmd, &o.speculative);
  AddKvCacheDtypeOption(cmd, &o.kv_cache_dtype);
  cmd->add_option("--output", o.output, "Write the figures as JSON to this file");
}

}  // namespace

void AddBenchCommand(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* bench = app.add_subcommand("bench", "Benchmarks: throughput (default), batching, prefix-cache, paged-cache, detok, tokenize, serve");
  bench->require_subcommand(0, 1);
  AddModelOptions(bench, *o);
  bench->add_option("--prompts", o->prompts, "Requests")->capture_default_str();
  bench->add_option("--concurrency", o->concurrency, "Requests running at once")->capture_default_str();
  bench->add_option("--runs", o->runs, "Repetitions (each a fresh random workload)")->capture_default_str();

  auto* batching = bench->add_subcommand("batching", "1 request vs N concurrent: tokens/s each and the speedup, sweeping 1, 2, 4, ...");
  AddModelOptions(batching, *o);
  batching->add_option("--max-concurrency", o->max_concurrency, "Largest concurrency of the sweep")->capture_default_str();
  batching->add_option("--min-concurrency", o->min_concurrency, "First concurrency of the sweep (doubling up to the largest)")
      ->capture_default_str();
  batching->add_option("--loras", o->loras,
                       "Also run each concurrency with its sequences spread over this many random LoRA adapters, and "
                       "print the adapters' aggregate decode against the base model's");
  batching->add_option("--lora-rank", o->lora_rank, "Rank of those adapters")->capture_default_str();
  batching->add_option("--lora-targets", o->lora_targets, "Projections they adapt")->capture_default_str();
  batching->add_option("--chart", o->chart, "Draw generation and aggregate decode tokens/s vs concurrency to this SVG file");
  batching->callback([o] { ExitOnError(RunBatching(*o)); });
  auto* speculative = bench->add_subcommand(
      "speculative",
      "Speculative decoding (prompt lookup, or a draft model) on vs off over the same prompts: decode tokens/s, acceptance");
  AddModelOptions(speculative, *o);
  speculative->add_option("--prompts", o->prompts, "Requests")->capture_default_str();
  speculative->add_option("--concurrency", o->concurrency, "Requests running at once")->capture_default_str();
  speculative->add_option("--runs", o->runs, "Repetitions (each a fresh random workload)")->capture_default_str();
  auto temperature = std::make_shared<float>(0.0f);
  speculative->add_option("--temperature", *temperature, "Sampling temperature (0: greedy); seeded, so both runs draw alike")
      ->capture_default_str();
  auto workload = std::make_shared<std::string>("random");
  speculative->add_option("--workload", *workload,
                          "random: random prompts; retell: summarization-style, the model's own document of about "
                          "--input-len tokens then its opening again, so the output copies from the prompt")
      ->check(CLI::IsMember({"random", "retell"}))
      ->capture_default_str();
  speculative->callback([o, temperature, workload] { ExitOnError(RunSpeculative(*o, *temperature, *workload)); });
  auto* kv_dtype = bench->add_subcommand(
      "kv-cache-dtype",
      "KV cache in f32, f16, bf16 and int8: bytes per token, logit error against f32, top-1 agreement, decode tokens/s");
  AddModelOptions(kv_dtype, *o);
  kv_dtype->add_option("--prompts", o->prompts, "Requests")->capture_default_str();
  kv_dtype->add_option("--concurrency", o->concurrency, "Requests running at once")->capture_default_str();
  kv_dtype->callback([o] { ExitOnError(RunKvCacheDtype(*o)); });
  auto* prefix = bench->add_subcommand("prefix-cache", "First prompt MISS, same prompt HIT, different MISS, first again HIT");
  AddModelOptions(prefix, *o);
  prefix->callback([o] { ExitOnError(RunPrefixCache(*o)); });
  auto* paged = bench->add_subcommand("paged-cache", "20 requests sharing a ~286-token system prompt, with and without prefix sharing");
  AddModelOptions(paged, *o);
  paged->callback([o] { ExitOnError(RunPagedCache(*o)); });
  auto* detok = bench->add_subcommand("detok", "Streaming detokenizer: decode-per-token vs incremental at 8 to 4K tokens");
  detok->add_option("--tokenizer", o->tokenizer, "tokenizer.json (or folder), .gguf, or llama2.c tokenizer.bin")->required();
  detok->add_option("--output", o->output, "Write the figures as JSON to this file");
  detok->callback([o] { ExitOnError(RunDetok(*o)); });
  auto t = std::make_shared<TokenizeBenchCli>();
  auto* tokenize = bench->add_subcommand("tokenize", "Encode MB/s on English prose, long inputs at 1x/2x/4x, tokenizers.js side by side");
  tokenize->add_option("--tokenizer", o->tokenizer, "tokenizer.json (or folder), .gguf, or llama2.c tokenizer.bin")->required();
  tokenize->add_option("--output", o->output, "Write the figures as JSON to this file");
  tokenize->add_option("--text", t->text_file, "Encode this file instead of the generated English prose");
  tokenize->add_option("--bytes", t->bytes, "Generated English bytes, and the 1x no-spaces size")->capture_default_str();
  tokenize->add_option("--chars", t->chars, "1x length of the repeated-character inputs")->capture_default_str();
  tokenize->add_option("--repeats", t->repeats, "Warm runs per case (the best is reported)")->capture_default_str();
  tokenize->add_flag("--reference", t->reference, "Also time tokenizers.js (node) on the English text");
  tokenize->add_flag("--reference-long", t->reference_long, "--reference with the 1x long inputs too (slow: about a minute)");
  tokenize->add_option("--reference-script", t->reference_script, "The node benchmark script")->capture_default_str();
  tokenize->callback([o, t] { ExitOnError(RunTokenize(*o, *t)); });
  auto st = std::make_shared<StructuredCli>();
  auto* structured = bench->add_subcommand(
      "structured", "Constrained decoding: mask time per token over a JSON Schema corpus, and decode with N constrained vs unconstrained requests");
  AddModelOptions(structured, *o);
  structured->add_option("--tokenizer", o->tokenizer, "Tokenizer (default: the model's), e.g. ../shared/tokenizers/qwen3");
  structured->add_option("--corpus", st->corpus, "JSON Schema corpus, one {name, schema} per line")->capture_default_str();
  structured->add_option("--steps", st->steps, "Tokens per simulated request (mask benchmark)")->capture_default_str();
  structured->add_option("--walks", st->walks, "Simulated requests per schema (the first cold)")->capture_default_str();
  structured->add_option("--requests", st->requests, "Concurrent requests in the decode comparison")->capture_default_str();
  structured->add_flag("--skip-decode", st->skip_decode, "Only the mask benchmark (no model is loaded)");
  structured->callback([o, st] { ExitOnError(RunStructured(*o, *st)); });
  auto sv = std::make_shared<ServeCli>();
  auto* serve = bench->add_subcommand(
      "serve", "Online load on any OpenAI-compatible server (parallm serve, vLLM, llama.cpp): TTFT, TPOT, ITL, E2E, tok/s");
  serve->add_option("--base-url", sv->base_url, "The server")->capture_default_str();
  serve->add_option("--api-key", sv->api_key, "Sent as 'Authorization: Bearer KEY' (default: $OPENAI_API_KEY)");
  serve->add_option("--endpoint", sv->endpoint, "/v1/completions or /v1/chat/completions")->capture_default_str();
  serve->add_option("--model", sv->model, "Model name to send (default: the first id of GET /v1/models)");
  serve->add_option("--num-prompts", sv->num_prompts, "Requests to send")->capture_default_str();
  serve->add_option("--request-rate", sv->request_rate, "Requests per second, Poisson arrivals; inf: all at once")
      ->capture_default_str();
  serve->add_option("--max-concurrency", sv->max_concurrency, "Requests in flight at most (default: no limit)");
  serve->add_option("--random-input-len", sv->random_input_len, "Prompt tokens per request (random dataset)")
      ->capture_default_str();
  serve->add_option("--random-output-len", sv->random_output_len, "max_tokens per request (random dataset)")
      ->capture_default_str();
  serve->add_option("--random-range-ratio", sv->random_range_ratio,
                    "Draw lengths uniformly in [len*(1-r), len*(1+r)]")->capture_default_str();
  serve->add_option("--random-prefix-len", sv->random_prefix_len, "Random tokens shared by every prompt, before its own")
      ->capture_default_str();
  serve->add_option("--random-vocab-size", sv->random_vocab_size,
                    "Without --tokenizer, prompt token ids are drawn below this")->capture_default_str();
  serve->add_option("--dataset-path", sv->dataset_path, "ShareGPT JSON instead of random prompts");
  serve->add_option("--sharegpt-output-len", sv->sharegpt_output_len, "max_tokens for every ShareGPT request (default: the reply's length)");
  serve->add_option("--tokenizer", sv->tokenizer,
                    "tokenizer.json, folder or .gguf: random prompts as text of exact lengths, and token counts");
  serve->add_flag("--ignore-eos,!--no-ignore-eos", sv->ignore_eos,
                  "Generate max_tokens whatever the model says (default: on for random prompts, off for ShareGPT)");
  serve->add_option("--seed", sv->seed, "Seed of the prompts and the arrival times")->capture_default_str();
  serve->add_option("--timeout", sv->timeout, "Seconds of silence from the server before a request fails")
      ->capture_default_str();
  serve->add_option("--ready-check-timeout-sec", sv->ready_check_timeout,
                    "Wait up to this many seconds for the server to answer GET /v1/models (and /health not 503)")
      ->capture_default_str();
  serve->add_option("--output,--save-result", sv->output, "Write the figures as JSON to this file");
  serve->add_option("--chart", sv->chart, "Draw TTFT/TPOT/ITL/E2E mean, median and p99 to this SVG file");
  serve->callback([sv] { ExitOnError(RunServe(*sv)); });
  bench->callback([o, bench] {
    if (bench->get_subcommands().empty())
      ExitOnError(RunThroughput(*o));
  });
}

}  // namespace parallm::cli
