// LoRA adapters: the three formats written by the project's writers load back to the same A, B and scale (with
// q/k rows re-paired for the base's RoPE convention), unfit adapters are clear errors, and the engine runs many
// adapters in one batch: 64 requests over the base and 4 adapters equal each request run alone, the prefix cache
// never shares blocks across adapters.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "engine/async_engine.h"
#include "engine/llm.h"
#include "engine/lora_registry.h"
#include "model/lora.h"
#include "model/lora_writer.h"
#include "test_models.h"

namespace parallm {
namespace {

using T = LoraTarget;

ModelConfig TinyConfig(Arch arch = Arch::kLlama) {
  auto c = PresetConfig("tiny", &arch);
  EXPECT_TRUE(c.ok());
  return *c;
}

std::string WriteAdapter(const ModelConfig& c, LoraFormat f, const RandomLoraSpec& spec, const std::string& name,
                         bool rslora = false) {
  const std::string dir = testing::ScratchDir("lora-" + name);
  const std::string path = dir + (f == LoraFormat::kGguf ? "/adapter.gguf" : "/adapter");
  LoraWriteOptions o;
  o.format = f;
  o.rslora = rslora;
  Status st = WriteLoraAdapter(MakeRandomLora(c, spec), c, o, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

void ExpectSameAdapter(const LoraAdapter& want, const LoraAdapter& got, const ModelConfig& base) {
  ASSERT_EQ(want.layers.size(), got.layers.size());
  for (size_t l = 0; l < want.layers.size(); ++l) {
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const LoraWeights& w = want.layers[l][static_cast<size_t>(t)];
      const LoraWeights& g = got.layers[l][static_cast<size_t>(t)];
      ASSERT_EQ(w.rank, g.rank) << "layer " << l << " " << LoraTargetHfName(static_cast<T>(t));
      if (w.rank == 0) continue;
      EXPECT_NEAR(w.scale, g.scale, 1e-6f * w.scale);
      EXPECT_EQ(w.a, g.a);
      std::vector<float> b = w.b;
      if (static_cast<T>(t) == T::kQ || static_cast<T>(t) == T::kK) {
        const int heads = static_cast<T>(t) == T::kQ ? base.n_heads : base.n_kv_heads;
        b = PermuteRopeRows(b, static_cast<int64_t>(b.size()) / w.rank, w.rank, heads, RopeStyle::kHalf, base.rope_style);
      }
      EXPECT_EQ(b, g.b) << "layer " << l << " " << LoraTargetHfName(static_cast<T>(t));
    }
  }
}

TEST(Lora, EachFormatLoadsBackForBothRopePairings) {
  for (LoraFormat f : {LoraFormat::kMlx, LoraFormat::kPeft, LoraFormat::kGguf}) {
    for (RopeStyle base_rope : {RopeStyle::kHalf, RopeStyle::kInterleaved}) {
      SCOPED_TRACE(std::string(LoraFormatName(f)) + (base_rope == RopeStyle::kHalf ? " half" : " interleaved"));
      ModelConfig c = TinyConfig();
      c.rope_style = base_rope;
      RandomLoraSpec spec;
      spec.rank = 3;
      spec.scale = 1.5f;
      spec.targets = {T::kQ, T::kK, T::kV, T::kO, T::kGate, T::kUp, T::kDown};
      spec.num_layers = 1;  // the last layer only (mlx-lm's num_layers; PEFT's layers_to_transform)
      const std::string path = WriteAdapter(c, f, spec, std::string("rt-") + LoraFormatName(f));
      auto loaded = LoadLoraAdapter(path, c);
      ASSERT_TRUE(loaded.ok()) << loaded.status().message();
      EXPECT_EQ((*loaded)->format, f);
      ExpectSameAdapter(MakeRandomLora(c, spec), **loaded, c);
    }
  }
}

TEST(Lora, RsLoraScalesByTheSquareRootOfTheRank) {
  ModelConfig c = TinyConfig();
  RandomLoraSpec spec;
  spec.rank = 4;
  spec.scale = 0.75f;
  auto loaded = LoadLoraAdapter(WriteAdapter(c, LoraFormat::kPeft, spec, "rslora", /*rslora=*/true), c);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_NEAR((*loaded)->Find(0, T::kQ)->scale, 0.75f, 1e-6f);
  std::ifstream f(std::string((*loaded)->path) + "/adapter_config.json");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const boost::json::object cfg = boost::json::parse(text).as_object();
  EXPECT_TRUE(cfg.at("use_rslora").as_bool());
  EXPECT_DOUBLE_EQ(cfg.at("lora_alpha").to_number<double>(), 1.5);  // 0.75 * sqrt(4), not 0.75 * 4
}

void Rewrite(const std::string& path, const std::string& from, const std::string& to) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, from.size(), to);
  std::ofstream(path) << text;
}

void ExpectError(const std::string& path, const ModelConfig& c, const std::string& needle) {
  auto loaded = LoadLoraAdapter(path, c);
  ASSERT_FALSE(loaded.ok()) << path;
  EXPECT_NE(loaded.status().message().find(needle), std::string::npos) << loaded.status().message();
}

TEST(Lora, UnfitAdaptersAreClearErrors) {
  ModelConfig c = TinyConfig();
  RandomLoraSpec spec;
  // Written for a wider model: every format names the mismatch.
  ModelConfig wide = c;
  wide.hidden *= 2;
  for (LoraFormat f : {LoraFormat::kMlx, LoraFormat::kPeft, LoraFormat::kGguf})
    ExpectError(WriteAdapter(wide, f, spec, std::string("wide-") + LoraFormatName(f)), c, "another model");
  // DoRA, in both folder formats.
  std::string mlx = WriteAdapter(c, LoraFormat::kMlx, spec, "dora-mlx");
  Rewrite(mlx + "/adapter_config.json", "\"fine_tune_type\":\"lora\"", "\"fine_tune_type\":\"dora\"");
  ExpectError(mlx, c, "DoRA");
  std::string peft = WriteAdapter(c, LoraFormat::kPeft, spec, "dora-peft");
  Rewrite(peft + "/adapter_config.json", "\"use_dora\":false", "\"use_dora\":true");
  ExpectError(peft, c, "use_dora");
  // A module the base has no projection for, and a tensor outside target_modules.
  mlx = WriteAdapter(c, LoraFormat::kMlx, spec, "keys-mlx");
  Rewrite(mlx + "/adapter_config.json", "\"self_attn.v_proj\"", "\"self_attn.qkv_proj\"");
  ExpectError(mlx, c, "self_attn.qkv_proj");
  peft = WriteAdapter(c, LoraFormat::kPeft, spec, "targets-peft");
  Rewrite(peft + "/adapter_config.json", "\"v_proj\"", "\"o_proj\"");
  ExpectError(peft, c, "not among target_modules");
  // More layers than the base has.
  ModelConfig deep = c;
  deep.n_layers += 2;
  ExpectError(WriteAdapter(deep, LoraFormat::kGguf, spec, "deep-gguf"), c, "layer");
  // A GGUF adapter for another architecture.
  ExpectError(WriteAdapter(TinyConfig(Arch::kQwen2), LoraFormat::kGguf, spec, "qwen-gguf"), c, "architecture");
  ExpectError(testing::ScratchDir("lora-empty"), c, "no adapters.safetensors");
  // MLP targets on a mixture-of-experts base: its experts take no updates, so the adapter is refused, not ignored;
  // attention targets load.
  const ModelConfig moe = TinyConfig(Arch::kQwen3Moe);
  RandomLoraSpec mlp = spec;
  mlp.targets = {T::kQ, T::kUp};
  ExpectError(WriteAdapter(moe, LoraFormat::kPeft, mlp, "moe-mlp"), moe, "mixture-of-experts");
  EXPECT_TRUE(LoadLoraAdapter(WriteAdapter(moe, LoraFormat::kPeft, spec, "moe-attn"), moe).ok());
}

EngineConfig LoraEngineConfig() {
  EngineConfig c;
  c.num_kv_blocks = 256;
  c.block_size = 16;
  c.threads = 2;
  c.scheduler.max_num_seqs = 64;
  c.scheduler.max_num_batched_tokens = 256;
  return c;
}

// 64 requests over the base model and 4 adapters (three formats, ranks 4 and 8, attention-only and
// attention + MLP) in one run equal each request run alone; every adapter changes what the base generates.
TEST(Lora, SixtyFourRequestsOverFourAdaptersEqualEachAlone) {
  auto model = testing::TinyModel({Arch::kLlama, ModelFormat::kGguf, DType::kF32}, "lora-engine");
  ASSERT_NE(model, nullptr);
  const ModelConfig c = model->config();  // GGUF llama: interleaved q/k rows, the adapters re-pair theirs
  std::vector<std::shared_ptr<const LoraAdapter>> adapters = {nullptr};
  const struct {
    LoraFormat format;
    int rank;
    std::vector<T> targets;
  } kinds[] = {{LoraFormat::kPeft, 4, {T::kQ, T::kK, T::kV, T::kO}},
               {LoraFormat::kMlx, 8, {T::kQ, T::kK, T::kV, T::kO, T::kGate, T::kUp, T::kDown}},
               {LoraFormat::kGguf, 8, {T::kQ, T::kV, T::kGate, T::kDown}},
               {LoraFormat::kPeft, 8, {T::kK, T::kO, T::kUp}}};
  for (size_t i = 0; i < std::size(kinds); ++i) {
    RandomLoraSpec spec;
    spec.rank = kinds[i].rank;
    spec.targets = kinds[i].targets;
    spec.seed = 100 + i;
    auto a = LoadLoraAdapter(WriteAdapter(c, kinds[i].format, spec, "engine" + std::to_string(i)), c);
    ASSERT_TRUE(a.ok()) << a.status().message();
    adapters.push_back(*a);
  }
  std::mt19937_64 rng(5);
  std::vector<std::vector<int32_t>> prompts(64);
  std::vector<std::shared_ptr<const LoraAdapter>> chosen;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int len = 3 + static_cast<int>(rng() % 30);
    for (int k = 0; k < len; ++k) prompts[i].push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(c.vocab - 2)));
    chosen.push_back(adapters[i % adapters.size()]);
  }
  SamplingParams params;
  params.max_tokens = 8;
  params.ignore_eos = true;
  LLM llm(std::move(model), LoraEngineConfig());
  auto together = llm.Generate(prompts, {params}, nullptr, chosen);
  ASSERT_TRUE(together.ok()) << together.status().message();
  llm.engine().CheckIntegrity();
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto alone = llm.Generate({prompts[i]}, {params}, nullptr, {chosen[i]});
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ((*alone)[0].ids(), (*together)[i].ids()) << "prompt " << i;
  }
  // Each adapter moves the output away from the base's on some of the prompts (or the test could not fail).
  for (size_t k = 1; k < adapters.size(); ++k) {
    int differ = 0;
    for (size_t i = k; i < prompts.size(); i += adapters.size()) {
      auto base = llm.Generate({prompts[i]}, {params});
      ASSERT_TRUE(base.ok());
      differ += (*base)[0].ids() != (*together)[i].ids() ? 1 : 0;
    }
    EXPECT_GT(differ, 0) << "adapter " << k << " changes nothing";
  }
}

TEST(Lora, PrefixCacheNeverSharesBlocksAcrossAdapters) {
  auto model = testing::TinyModel({Arch::kQwen2, ModelFormat::kGguf, DType::kF32}, "lora-prefix");
  ASSERT_NE(model, nullptr);
  const ModelConfig c = model->config();
  RandomLoraSpec spec;
  auto a = LoadLoraAdapter(WriteAdapter(c, LoraFormat::kPeft, spec, "prefix-a"), c);
  auto b = LoadLoraAdapter(WriteAdapter(c, LoraFormat::kPeft, spec, "prefix-b"), c);  // same file content
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + i);
  SamplingParams params;
  params.max_tokens = 2;
  params.ignore_eos = true;
  LLM llm(std::move(model), LoraEngineConfig());
  auto run = [&](std::shared_ptr<const LoraAdapter> adapter) {
    auto out = llm.Generate({prompt}, {params}, nullptr, {std::move(adapter)});
    EXPECT_TRUE(out.ok());
    return out.ok() ? (*out)[0].cached_tokens : -1;
  };
  EXPECT_EQ(run(nullptr), 0);
  EXPECT_EQ(run(*a), 0);        // the base's blocks are not the adapter's
  EXPECT_EQ(run(*a), 39);       // the adapter's own blocks are (all but the last token)
  EXPECT_EQ(run(*b), 0);        // another loaded adapter is another identity
  EXPECT_EQ(run(nullptr), 39);  // and the base's blocks are still there
}

TEST(Lora, RegistryKeepsMaxLorasResidentAndEvictsTheLeastRecentlyUsed) {
  ModelConfig c = TinyConfig();
  LoraRegistry registry(c, 2);
  RandomLoraSpec spec;
  for (const char* name : {"a", "b", "c"})
    ASSERT_TRUE(registry.Add(name, WriteAdapter(c, LoraFormat::kPeft, spec, std::string("reg-") + name)).ok());
  auto resident = [&] {
    std::string out;
    for (const auto& e : registry.List()) out += e.resident ? e.name : "-";
    return out;
  };
  EXPECT_EQ(resident(), "-bc");  // a, the least recently used, was evicted
  EXPECT_EQ(registry.num_loads(), 3);
  auto a = registry.Acquire("a");  // loaded again; now b is the least recently used
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(resident(), "a-c");
  EXPECT_EQ(registry.num_loads(), 4);
  ASSERT_TRUE(registry.Acquire("c").ok());  // resident: no load
  EXPECT_EQ(registry.num_loads(), 4);
  EXPECT_FALSE(registry.Add("c", WriteAdapter(c, LoraFormat::kPeft, spec, "reg-c2")).ok());  // name taken
  EXPECT_FALSE(registry.Add("d", "/no/such/adapter").ok());
  // Unloading: new requests fail, a request holding the adapter keeps it.
  EXPECT_TRUE(registry.Remove("a"));
  auto gone = registry.Acquire("a");
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("does not exist"), std::string::npos);
  EXPECT_GT((*a)->max_rank, 0);
  EXPECT_FALSE(registry.Remove("a"));
}

// What the server's LoRA gauge (vllm:lora_requests_info) reports: the names the registry serves the adapters as, those
// of the running requests and those of the waiting ones, each once. With max_loras 1 a step runs one adapter's
// requests, so the second adapter's wait behind the first's.
TEST(Lora, MetricsNameTheAdaptersOfRunningAndWaitingRequests) {
  auto model = testing::TinyModel({Arch::kLlama, ModelFormat::kGguf, DType::kF32}, "lora-metrics");
  ASSERT_NE(model, nullptr);
  const ModelConfig c = model->config();
  LoraRegistry registry(c, 4);
  RandomLoraSpec spec;
  ASSERT_TRUE(registry.Add("math", WriteAdapter(c, LoraFormat::kPeft, spec, "metrics-math")).ok());
  ASSERT_TRUE(registry.Add("sql", WriteAdapter(c, LoraFormat::kGguf, spec, "metrics-sql")).ok());
  EngineConfig config = LoraEngineConfig();
  config.scheduler.max_loras = 1;
  AsyncEngine engine(std::move(model), config, nullptr);
  SamplingParams p;
  p.max_tokens = c.context_length - 8;  // runs until cancelled, for all the test needs
  p.ignore_eos = true;
  std::vector<uint64_t> ids;
  for (const char* name : {"math", "math", "sql", "sql"}) {  // math first: its requests run, sql's wait
    auto adapter = registry.Acquire(name);
    ASSERT_TRUE(adapter.ok()) << adapter.status().message();
    GenerationRequest r{{1, 2, 3}, p, 0, *adapter};
    ASSERT_TRUE(engine.Validate(r).ok());
    const Submission sub = engine.Submit(std::move(r), [](RequestUpdate) {});
    ASSERT_EQ(sub.admission, Admission::kAccepted);
    ids.push_back(sub.id);
  }
  // Gauges are taken between steps: wait for a step with both math requests running and both sql ones waiting.
  auto wait_for = [&](auto&& pred) {
    for (int i = 0; i < 30000 && !pred(engine.Metrics()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return engine.Metrics();
  };
  EngineMetrics m =
      wait_for([](const EngineMetrics& e) { return e.num_requests_running == 2 && e.num_requests_waiting == 2; });
  EXPECT_EQ(m.max_loras, 1);
  EXPECT_EQ(m.num_requests_running, 2);
  EXPECT_EQ(m.running_lora_adapters, std::vector<std::string>{"math"});
  EXPECT_EQ(m.waiting_lora_adapters, std::vector<std::string>{"sql"});
  for (uint64_t id : ids) engine.Cancel(id);
  m = wait_for([](const EngineMetrics& e) { return e.num_requests_running + e.num_requests_waiting == 0; });
  EXPECT_TRUE(m.running_lora_adapters.empty());
  EXPECT_TRUE(m.waiting_lora_adapters.empty());
}

}  // namespace
}  // namespace parallm
