// `parallm bench`: offline throughput (the default), `bench batching` (1 vs N concurrent requests and a sweep),
// `bench prefix-cache` (the seed's HIT/MISS table) and `bench paged-cache` (a shared system prompt with and
// without prefix sharing), `bench detok` (streaming detokenization) and `bench tokenize` (Encode MB/s, long inputs,
// tokenizers.js side by side). Every command prints a table and can write JSON (--output).
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "bench/detok.h"
#include "bench/offline.h"
#include "bench/tokenize_bench.h"
#include "chat/model_text.h"
#include "cli/commands.h"
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
  int max_num_batched_tokens = 512;
  double kv_cache_gb = 2.0;
  std::string output;
  std::string tokenizer;
};

EngineConfig Config(const BenchOptions& o, int max_seqs, bool prefix_caching = true) {
  EngineConfig c;
  c.kv_cache_gb = o.kv_cache_gb;
  c.threads = o.threads;
  c.enable_prefix_caching = prefix_caching;
  c.scheduler.max_num_seqs = max_seqs;
  c.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  return c;
}

Result<std::unique_ptr<LLM>> Load(const BenchOptions& o, const EngineConfig& config) {
  if (IsSyntheticSpec(o.model)) std::fprintf(stderr, "building %s in memory...\n", o.model.c_str());
  return LLM::Load(o.model, config);
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
  std::printf("%11s %9s %9s %10s %11s %9s %8s\n", "concurrency", "requests", "time s", "gen tok/s", "decode t/s",
              "speedup", "ttft s");
  double single = 0;
  for (int c = 1; c <= o.max_concurrency; c *= 2) {
    // c requests at once, each max_tokens long: the engine runs them as one batch of c sequences.
    bench::Workload w{c, o.input_len, o.max_tokens, static_cast<uint64_t>(c)};
    auto f = bench::Measure(**llm, bench::RandomPrompts(w, vocab), o.max_tokens);
    if (!f.ok()) return Fail(f.status().message());
    if (c == 1) single = f->generation_tps();
    std::printf("%11d %9d %9.2f %10.1f %11.1f %8.2fx %8.2f\n", c, f->requests, f->seconds, f->generation_tps(),
                f->decode_tps, f->generation_tps() / single, f->ttft_mean);
    boost::json::object row = f->ToJson();
    row["concurrency"] = c;
    row["speedup"] = f->generation_tps() / single;
    sweep.push_back(row);
    std::fflush(stdout);
  }
  report["sweep"] = sweep;
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
        static_cast<double>(PagedKvStorage::BytesPerBlock((*llm)->model().KvShape(1, (*llm)->engine().config().block_size)));
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

void AddModelOptions(CLI::App* cmd, BenchOptions& o) {
  cmd->add_option("-m,--model", o.model, "Model file/folder, or synthetic:PRESET[:TYPE] built in memory")
      ->capture_default_str();
  cmd->add_option("--input-len", o.input_len, "Prompt tokens per request")->capture_default_str();
  cmd->add_option("--max-tokens", o.max_tokens, "Generated tokens per request")->capture_default_str();
  cmd->add_option("-t,--threads", o.threads, "Threads (default: all cores)");
  cmd->add_option("--kv-cache-gb", o.kv_cache_gb, "KV cache size in GiB")->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o.max_num_batched_tokens, "Tokens per engine step")->capture_default_str();
  cmd->add_option("--output", o.output, "Write the figures as JSON to this file");
}

}  // namespace

void AddBenchCommand(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* bench = app.add_subcommand("bench", "Benchmarks: throughput (default), batching, prefix-cache, paged-cache, detok, tokenize");
  bench->require_subcommand(0, 1);
  AddModelOptions(bench, *o);
  bench->add_option("--prompts", o->prompts, "Requests")->capture_default_str();
  bench->add_option("--concurrency", o->concurrency, "Requests running at once")->capture_default_str();
  bench->add_option("--runs", o->runs, "Repetitions (each a fresh random workload)")->capture_default_str();

  auto* batching = bench->add_subcommand("batching", "1 request vs N concurrent: tokens/s each and the speedup, sweeping 1, 2, 4, ...");
  AddModelOptions(batching, *o);
  batching->add_option("--max-concurrency", o->max_concurrency, "Largest concurrency of the sweep")->capture_default_str();
  batching->callback([o] {
    if (int rc = RunBatching(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
  auto* prefix = bench->add_subcommand("prefix-cache", "First prompt MISS, same prompt HIT, different MISS, first again HIT");
  AddModelOptions(prefix, *o);
  prefix->callback([o] {
    if (int rc = RunPrefixCache(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
  auto* paged = bench->add_subcommand("paged-cache", "20 requests sharing a ~286-token system prompt, with and without prefix sharing");
  AddModelOptions(paged, *o);
  paged->callback([o] {
    if (int rc = RunPagedCache(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
  auto* detok = bench->add_subcommand("detok", "Streaming detokenizer: decode-per-token vs incremental at 8 to 4K tokens");
  detok->add_option("--tokenizer", o->tokenizer, "tokenizer.json (or folder), .gguf, or llama2.c tokenizer.bin")->required();
  detok->add_option("--output", o->output, "Write the figures as JSON to this file");
  detok->callback([o] {
    if (int rc = RunDetok(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
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
  tokenize->callback([o, t] {
    if (int rc = RunTokenize(*o, *t); rc != 0) throw CLI::RuntimeError(rc);
  });
  bench->callback([o, bench] {
    if (bench->get_subcommands().empty())
      if (int rc = RunThroughput(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace parallm::cli
