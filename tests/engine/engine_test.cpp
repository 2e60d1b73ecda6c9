// The engine end to end on tiny random models: batched == one at a time (greedy and seeded sampling) on
// several architectures and weight types, chunked prefill, preemption, the prefix cache, and a stress run with
// random arrivals and cancellations that must leak no block.
#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "engine/llm.h"
#include "kernels/matmul.h"
#include "kernels/prompt_attention.h"
#include "formats/llama2c.h"
#include "structured/structured_output.h"

#include <boost/json.hpp>
#include "test_models.h"

namespace parallm {
namespace {

std::vector<std::vector<int32_t>> RandomPrompts(int n, int min_len, int max_len, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(n));
  for (auto& p : prompts) {
    int len = min_len + static_cast<int>(rng() % static_cast<uint64_t>(max_len - min_len + 1));
    for (int i = 0; i < len; ++i) p.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab - 2)));
  }
  return prompts;
}

std::vector<std::vector<int32_t>> Ids(const std::vector<Completion>& completions) {
  std::vector<std::vector<int32_t>> ids;
  for (const Completion& c : completions) ids.push_back(c.ids());
  return ids;
}

// The same tokens, and the same bits in each token's `k` top logprobs (the runners-up show the logits' low bits).
void ExpectSameTokensAndTopLogprobs(const std::vector<Completion>& got, const std::vector<Completion>& want, size_t k) {
  ASSERT_EQ(Ids(got), Ids(want));
  for (size_t r = 0; r < want.size(); ++r)
    for (size_t i = 0; i < want[r].ids().size(); ++i)
      for (size_t j = 0; j < k; ++j)
        ASSERT_EQ(got[r].choices[0].samples[i].top.at(j).logprob, want[r].choices[0].samples[i].top.at(j).logprob)
            << r << " " << i << " " << j;
}

EngineConfig SmallConfig(int blocks = 256, int max_seqs = 64, int max_tokens = 256) {
  EngineConfig c;
  c.num_kv_blocks = blocks;
  c.block_size = 16;
  c.threads = 2;
  c.scheduler.max_num_seqs = max_seqs;
  c.scheduler.max_num_batched_tokens = max_tokens;
  return c;
}

struct InvarianceCase {
  const char* name;
  testing::TinyModelOptions model;
  std::optional<KvDtype> kv_cache_dtype = std::nullopt;  // auto: f16 for the quantized models, f32 for f32 ones
};

class EngineBatchInvariance : public ::testing::TestWithParam<InvarianceCase> {};

TEST_P(EngineBatchInvariance, SixtyFourPromptsTogetherEqualOneAtATime) {
  const InvarianceCase& c = GetParam();
  auto model = testing::TinyModel(c.model, c.name);
  ASSERT_NE(model, nullptr);
  const int vocab = model->config().vocab;
  auto prompts = RandomPrompts(64, 3, 40, vocab, 11);
  std::vector<SamplingParams> params(64);
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].max_tokens = 12;
    params[i].ignore_eos = true;
    if (i % 2 == 1) {  // half greedy, half seeded sampling
      params[i].temperature = 0.9f;
      params[i].top_p = 0.95f;
      params[i].seed = 1000 + i;
      params[i].has_seed = true;
    }
  }
  EngineConfig config = SmallConfig();
  config.kv_cache_dtype = c.kv_cache_dtype;
  LLM together(std::move(model), config);
  auto batched = together.Generate(prompts, params);
  ASSERT_TRUE(batched.ok()) << batched.status().message();
  together.engine().CheckIntegrity();
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto alone = together.Generate({prompts[i]}, {params[i]});
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ((*alone)[0].ids(), (*batched)[i].ids()) << "prompt " << i;
    EXPECT_EQ((*batched)[i].ids().size(), 12u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, EngineBatchInvariance,
    ::testing::Values(InvarianceCase{"llama_f32", {Arch::kLlama, ModelFormat::kGguf, DType::kF32}},
                      InvarianceCase{"qwen2_q8_0", {Arch::kQwen2, ModelFormat::kGguf, DType::kQ8_0}},
                      InvarianceCase{"qwen3_q4_k", {Arch::kQwen3, ModelFormat::kGguf, DType::kQ4_K}},
                      // Keys and values stored as f32, bf16, f16 and as int8 with per-slot scales
                      // (--kv-cache-dtype; the cases above store their models' own, auto).
                      InvarianceCase{"qwen2_q8_0_kv_f32", {Arch::kQwen2, ModelFormat::kGguf, DType::kQ8_0},
                                     KvDtype::kF32},
                      InvarianceCase{"qwen2_q8_0_kv_bf16", {Arch::kQwen2, ModelFormat::kGguf, DType::kQ8_0},
                                     KvDtype::kBf16},
                      InvarianceCase{"llama_f32_kv_f16", {Arch::kLlama, ModelFormat::kGguf, DType::kF32},
                                     KvDtype::kF16},
                      InvarianceCase{"qwen3_q4_k_kv_int8", {Arch::kQwen3, ModelFormat::kGguf, DType::kQ4_K},
                                     KvDtype::kInt8},
                      InvarianceCase{"llama_mlx4", {Arch::kLlama, ModelFormat::kMlxFolder, DType::kF32, 4}},
                      // Mixture of experts: 16 experts top-4 plus the shared expert (the tiny preset), the tokens of
                      // the whole batch grouped by expert (model_test covers qwen3moe and mixtral at the model level).
                      InvarianceCase{"qwen2moe_mlx4", {Arch::kQwen2Moe, ModelFormat::kMlxFolder, DType::kF32, 4}},
                      // Windows (7 positions) shorter than most prompts and outputs, on every windowed layer
                      // (Gemma 2: even layers; Phi-3: all, with LongRoPE switching past 24 positions).
                      InvarianceCase{"gemma2_q8_0_window7", [] {
                                       testing::TinyModelOptions o{Arch::kGemma2, ModelFormat::kGguf, DType::kQ8_0};
                                       o.sliding_window = 7;
                                       return o;
                                     }()},
                      // Hybrid Nemotron-H (Mamba-2 + attention + MLP + experts; HF F32): each request's recurrent
                      // state in its own slot, carried across prefill chunks and decode steps.
                      InvarianceCase{"nemotronh_f32", {Arch::kNemotronH, ModelFormat::kHfFolder, DType::kF32}},
                      InvarianceCase{"phi3_mlx4_window7_longrope", [] {
                                       testing::TinyModelOptions o{Arch::kPhi3, ModelFormat::kMlxFolder, DType::kF32, 4};
                                       o.sliding_window = 7;
                                       o.longrope_original = 24;
                                       return o;
                                     }()}),
    [](const auto& info) { return std::string(info.param.name); });

// --kv-cache-dtype auto stores a quantized or 16-bit model's keys and values in f16 (as llama.cpp does) and an f32
// model's in f32; a type asked for is kept.
TEST(Engine, AutoKvCacheTypeFollowsTheWeights) {
  const std::pair<testing::TinyModelOptions, KvDtype> cases[] = {
      {{Arch::kLlama, ModelFormat::kGguf, DType::kF32}, KvDtype::kF32},
      {{Arch::kQwen2, ModelFormat::kGguf, DType::kQ8_0}, KvDtype::kF16},
      {{Arch::kQwen3, ModelFormat::kGguf, DType::kQ4_K}, KvDtype::kF16},
      {{Arch::kLlama, ModelFormat::kMlxFolder, DType::kF32, 4}, KvDtype::kF16},
      {{Arch::kNemotronH, ModelFormat::kHfFolder, DType::kF32}, KvDtype::kF32},
  };
  int i = 0;
  for (const auto& [options, want] : cases) {
    auto model = testing::TinyModel(options, "auto_kv_" + std::to_string(i++));
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->AutoKvDtype(), want) << i;
    EXPECT_EQ(Engine(*model, SmallConfig(8)).kv_dtype(), want) << i;
    EngineConfig asked = SmallConfig(8);
    asked.kv_cache_dtype = KvDtype::kBf16;
    EXPECT_EQ(Engine(*model, asked).kv_dtype(), KvDtype::kBf16) << i;
    // What `info` and `bench` print per token is what the storage holds.
    for (KvDtype dtype : kKvDtypes)
      EXPECT_EQ(KvBytesPerToken(model->config(), dtype) * 16,
                static_cast<int64_t>(PagedKvStorage::BytesPerBlock(model->KvShape(1, 16, dtype))))
          << i << " " << KvDtypeName(dtype);
  }
}

// Steps whose requests all pick greedily without logprobs take only each row's argmax from the model (the logits are
// never stored); with logprobs the same requests take the full logits path: the tokens are the same, on a Q8_0 model
// and on Gemma 2 (its final soft-cap applied chunk by chunk before the pick).
TEST(Engine, GreedyStepsWithoutLogitsGiveTheLogitsPathsTokens) {
  for (const auto& [name, options] :
       {std::pair{"qwen2_q8_0", testing::TinyModelOptions{Arch::kQwen2, ModelFormat::kGguf, DType::kQ8_0}},
        std::pair{"gemma2_q8_0", testing::TinyModelOptions{Arch::kGemma2, ModelFormat::kGguf, DType::kQ8_0}}}) {
    auto model = testing::TinyModel(options, name);
    ASSERT_NE(model, nullptr);
    ASSERT_TRUE(std::string(name) != "gemma2_q8_0" || model->config().final_softcap > 0);
    const auto prompts = RandomPrompts(40, 3, 30, model->config().vocab, 17);
    LLM llm(std::move(model), SmallConfig());
    SamplingParams greedy;
    greedy.max_tokens = 10;
    greedy.ignore_eos = true;
    SamplingParams with_logprobs = greedy;
    with_logprobs.logprobs = 0;
    auto fast = llm.Generate(prompts, {greedy});
    auto full = llm.Generate(prompts, {with_logprobs});
    ASSERT_TRUE(fast.ok() && full.ok());
    EXPECT_EQ(Ids(*fast), Ids(*full)) << name;
    llm.engine().CheckIntegrity();
  }
}

// A model windowed on every layer (Mistral-style, window 12) releases blocks behind the window: requests far longer
// than the whole cache (10 blocks of 16 = 160 slots) run, chunked and batched, and give exactly the tokens they give
// with a cache large enough to keep everything.
TEST(Engine, SlidingWindowReleasesBlocksAndKeepsOutputs) {
  testing::TinyModelOptions o;
  o.arch = Arch::kMistral;
  o.gguf_type = DType::kQ8_0;
  o.sliding_window = 12;
  auto prompts = RandomPrompts(6, 20, 90, 512, 9);
  std::vector<SamplingParams> params(1);
  params[0].max_tokens = 150;
  params[0].ignore_eos = true;
  LLM roomy(testing::TinyModel(o, "window-roomy"), SmallConfig(/*blocks=*/256));
  auto expected = roomy.Generate(prompts, params);
  ASSERT_TRUE(expected.ok());
  LLM tight(testing::TinyModel(o, "window-tight"), SmallConfig(/*blocks=*/10, 64, /*max_tokens=*/16));
  auto got = tight.Generate(prompts, params);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(Ids(*got), Ids(*expected));
  EXPECT_GT(tight.engine().kv_manager().stats().blocks_slid_out, 50);
  tight.engine().CheckIntegrity();
  EXPECT_EQ(tight.engine().kv_manager().num_free_blocks(), 10);
}

// Instruct models end turns with tokens other than the vocabulary's EOS (Gemma's <end_of_turn>, Phi-3's <|end|>):
// every id of generation_config.json's eos_token_id list ends a request, with finish_reason stop.
TEST(Engine, GenerationConfigEosListEndsRequests) {
  testing::TinyModelOptions o;
  o.arch = Arch::kPhi3;
  o.format = ModelFormat::kHfFolder;
  const std::string dir = testing::WriteTinyModel(o, "eos-list");
  std::vector<SamplingParams> params(1);
  params[0].max_tokens = 8;
  params[0].ignore_eos = true;
  const std::vector<std::vector<int32_t>> prompt = {{5, 17, 300, 42}};
  auto free_run = LLM::Load(dir, SmallConfig());
  ASSERT_TRUE(free_run.ok()) << free_run.status().message();
  auto all = (*free_run)->Generate(prompt, params);
  ASSERT_TRUE(all.ok());
  const std::vector<int32_t> ids = (*all)[0].ids();
  ASSERT_EQ(ids.size(), 8u);
  // The last generated token is made an end-of-turn token: generation now ends where it first appears.
  const int32_t end_of_turn = ids.back();
  const auto stop_at = std::find(ids.begin(), ids.end(), end_of_turn) - ids.begin();
  std::ofstream(dir + "/generation_config.json") << "{\"eos_token_id\": [511, " << end_of_turn << "]}";
  auto stopping = LLM::Load(dir, SmallConfig());
  ASSERT_TRUE(stopping.ok()) << stopping.status().message();
  params[0].ignore_eos = false;
  auto cut = (*stopping)->Generate(prompt, params);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ((*cut)[0].ids(), std::vector<int32_t>(ids.begin(), ids.begin() + stop_at));
  EXPECT_EQ((*cut)[0].finish_reason(), FinishReason::kStop);
}

TEST(Engine, ChunkedPrefillAndPreemptionKeepOutputs) {
  testing::TinyModelOptions o;
  o.arch = Arch::kQwen2;
  o.gguf_type = DType::kQ8_0;
  auto prompts = RandomPrompts(12, 20, 60, 512, 5);
  std::vector<SamplingParams> params(1);
  params[0].max_tokens = 20;
  params[0].ignore_eos = true;
  params[0].logprobs = 3;  // the runners-up's logprobs show the logits' low bits (the chosen token's is ~0 here)
  LLM reference(testing::TinyModel(o, "ref"), SmallConfig());
  auto expected = reference.Generate(prompts, params);
  ASSERT_TRUE(expected.ok());
  // A token budget of 8 chunks every prompt; 12 blocks of 16 cannot hold 12 requests of ~60 tokens at once.
  LLM squeezed(testing::TinyModel(o, "squeezed"), SmallConfig(/*blocks=*/12, 64, /*max_tokens=*/8));
  auto got = squeezed.Generate(prompts, params);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ExpectSameTokensAndTopLogprobs(*got, *expected, 3);
  EXPECT_GT(squeezed.engine().scheduler().num_preemptions(), 0);
  EXPECT_EQ(squeezed.engine().kv_manager().num_free_blocks(), 12);
}

// With more threads than KV heads, a prompt's bf16 rows run their attention in parts split across the threads
// (Model::AddPromptRuns; where the CPU has AMX-BF16): the outputs equal one thread's, token and logprob.
TEST(Engine, PromptRowsSplitAcrossThreadsEqualOneThread) {
  testing::TinyModelOptions o;
  o.arch = Arch::kQwen2;
  o.gguf_type = DType::kQ8_0;
  auto prompts = RandomPrompts(3, 150, 230, 512, 17);
  SamplingParams p;
  p.max_tokens = 8;
  p.ignore_eos = true;
  p.logprobs = 3;
  EngineConfig one = SmallConfig(), four = SmallConfig();
  one.threads = 1;
  four.threads = 4;
  LLM a(testing::TinyModel(o, "split-1"), one), b(testing::TinyModel(o, "split-4"), four);
  auto want = a.Generate(prompts, {p});
  auto got = b.Generate(prompts, {p});
  ASSERT_TRUE(want.ok() && got.ok());
  ExpectSameTokensAndTopLogprobs(*got, *want, 3);
}

TEST(Engine, PrefixCacheScenario) {
  // The seed's scenario: first request MISS; same prompt HIT; a different prompt MISS; back to the first HIT.
  testing::TinyModelOptions o;
  LLM llm(testing::TinyModel(o, "prefix"), SmallConfig());
  std::vector<int32_t> a(80), b(80);
  for (int i = 0; i < 80; ++i) {
    a[static_cast<size_t>(i)] = 10 + i;
    b[static_cast<size_t>(i)] = 300 - i;
  }
  SamplingParams p;
  p.max_tokens = 4;
  p.ignore_eos = true;
  auto run = [&](const std::vector<int32_t>& prompt) {
    auto r = llm.Generate({prompt}, {p});
    EXPECT_TRUE(r.ok());
    return (*r)[0];
  };
  Completion first = run(a);
  EXPECT_EQ(first.cached_tokens, 0);
  Completion again = run(a);
  // 5 full blocks of 16 = 80 tokens: 4 shared, and the last one's first 15 tokens copied (its last token must run).
  EXPECT_EQ(again.cached_tokens, 79);
  EXPECT_EQ(again.ids(), first.ids());
  Completion other = run(b);
  EXPECT_EQ(other.cached_tokens, 0);
  Completion back = run(a);
  EXPECT_EQ(back.cached_tokens, 79);
  EXPECT_EQ(back.ids(), first.ids());
  const KVCacheStats& s = llm.engine().kv_manager().stats();
  EXPECT_EQ(s.misses, 2);
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.tail_hits, 2);
  EXPECT_EQ(s.hit_tokens, 158);
}

// A prompt seen before computes only its last token: its blocks' slots come from the cache (the partly filled last one
// copied, with int8's scales), and what it generates equals a cold engine's, token and logprob, in every cache type.
// Prompts that go on past the first one's end, or leave it partway through its last block, likewise.
TEST(Engine, RepeatedPromptComputesOneTokenAndEqualsAColdRun) {
  testing::TinyModelOptions o;
  o.arch = Arch::kQwen2;
  o.gguf_type = DType::kQ8_0;
  const std::vector<int32_t> base = RandomPrompts(1, 45, 45, 512, 23)[0];  // 2 blocks of 16 and 13 tokens
  const std::vector<int32_t> shorter(base.begin(), base.begin() + 40);
  SamplingParams p;
  p.max_tokens = 6;
  p.ignore_eos = true;
  p.logprobs = 3;
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kInt8}) {
    SCOPED_TRACE(KvDtypeName(dtype));
    EngineConfig c = SmallConfig();
    c.kv_cache_dtype = dtype;
    LLM warm(testing::TinyModel(o, "tail-warm-" + std::string(KvDtypeName(dtype))), c);
    auto first = warm.Generate({base}, {p});
    ASSERT_TRUE(first.ok());
    // The conversation so far and one more token: through the first run's third block, now full.
    std::vector<int32_t> longer = base;
    longer.insert(longer.end(), (*first)[0].ids().begin(), (*first)[0].ids().begin() + 3);
    longer.push_back(7);
    for (const std::vector<int32_t>& prompt : {base, longer, shorter}) {
      auto got = warm.Generate({prompt}, {p});
      LLM cold(testing::TinyModel(o, "tail-cold-" + std::string(KvDtypeName(dtype))), c);
      auto want = cold.Generate({prompt}, {p});
      ASSERT_TRUE(got.ok() && want.ok());
      // The first run computed 45 + 5 tokens: all but the prompt's last are found, up to 50. Where prompts take a bf16
      // formula, only while this prompt's would compute them alike: the first run's positions from 32 (its
      // Bf16PromptEnd) took the int8 and f32 ones, which the longer prompt's would take from 48.
      const int32_t n = static_cast<int32_t>(prompt.size());
      const bool apart = warm.engine().model().PromptsTakeBf16() && Bf16PromptEnd(n) != Bf16PromptEnd(45);
      EXPECT_EQ((*got)[0].cached_tokens, apart ? 32 : std::min(n - 1, 50)) << n;
      ExpectSameTokensAndTopLogprobs(*got, *want, 3);
    }
  }
}

// Which models' prompts take a bf16 formula: quantized ones, where a kernel for it runs here (AMX's products and
// attention, or AVX512-BF16's attention), unless PARALLM_BF16_ROWS's switch is off; float models never.
TEST(Engine, PromptsTakeBf16OnlyForQuantizedModelsWhereAKernelRuns) {
  testing::TinyModelOptions f32, q8;
  f32.arch = q8.arch = Arch::kQwen2;
  q8.gguf_type = DType::kQ8_0;
  auto float_model = testing::TinyModel(f32, "formula-f32");
  auto quantized = testing::TinyModel(q8, "formula-q8");
  ASSERT_TRUE(float_model && quantized);
  EXPECT_FALSE(float_model->PromptsTakeBf16());
  const ModelConfig& c = quantized->config();
  const bool kernel = Bf16RowsEnabled() || PromptAttentionCovers(AttentionShapeOf(c, 0));
  EXPECT_EQ(quantized->PromptsTakeBf16(), kernel);
  SetBf16RowsEnabled(false);
  EXPECT_FALSE(quantized->PromptsTakeBf16());
  SetBf16RowsEnabled(true);
  EXPECT_EQ(quantized->PromptsTakeBf16(), kernel);
}

// A conversation's next turn (the first prompt, its answer, a new question) on a warm engine equals a cold run, token
// and logprob. Where prompts take MatMul's bf16 formula the answer's blocks were computed by the int8 one: the prefix
// cache must reuse the first prompt's blocks only (its full blocks before Bf16PromptEnd).
TEST(Engine, NextTurnOnACachedConversationEqualsAColdRun) {
  testing::TinyModelOptions o;
  o.arch = Arch::kQwen2;
  o.gguf_type = DType::kQ8_0;
  auto prompts = RandomPrompts(1, 70, 70, 512, 11);
  SamplingParams p;
  p.max_tokens = 40;
  p.ignore_eos = true;
  p.logprobs = 3;  // the chosen token's is 0 (this model is sure of it); the runners-up show the logits' low bits
  LLM warm(testing::TinyModel(o, "turns"), SmallConfig());
  auto first = warm.Generate(prompts, {p});
  ASSERT_TRUE(first.ok());
  std::vector<int32_t> next = prompts[0];
  next.insert(next.end(), (*first)[0].ids().begin(), (*first)[0].ids().end());
  for (int32_t t : {5, 6, 7, 8, 9}) next.push_back(t);
  auto again = warm.Generate({next}, {p});
  LLM cold(testing::TinyModel(o, "turns-cold"), SmallConfig());
  auto want = cold.Generate({next}, {p});
  ASSERT_TRUE(again.ok() && want.ok());
  // One formula: the first prompt and every answer token but the last (whose K/V was never computed), the last 13 of
  // them copied from the first request's last block. Where prompts take the bf16 formula, blocks wholly before its
  // int8 position only.
  EXPECT_EQ((*again)[0].cached_tokens, warm.engine().model().PromptsTakeBf16() ? 64 : 70 + 39);
  EXPECT_EQ((*want)[0].cached_tokens, 0);
  EXPECT_EQ((*again)[0].ids(), (*want)[0].ids());
  for (size_t i = 0; i < (*want)[0].ids().size(); ++i) {
    const SampleResult &got = (*again)[0].choices[0].samples[i], &cold_run = (*want)[0].choices[0].samples[i];
    ASSERT_EQ(got.top.size(), cold_run.top.size());
    for (size_t k = 0; k < got.top.size(); ++k) EXPECT_EQ(got.top[k].logprob, cold_run.top[k].logprob) << i << " " << k;
  }
}

TEST(Engine, SharedSystemPromptIsComputedOnce) {
  // 20 requests in 2 rounds of 10 sharing a 286-token system prompt, each with its own question; with prefix
  // caching the system prompt's full blocks are computed once and shared, and outputs equal the uncached run.
  testing::TinyModelOptions o;
  o.arch = Arch::kQwen2;
  o.gguf_type = DType::kQ8_0;
  std::vector<int32_t> system(286);
  for (size_t i = 0; i < system.size(); ++i) system[i] = static_cast<int32_t>((i * 37) % 500);
  auto questions = RandomPrompts(20, 8, 20, 512, 9);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& q : questions) {
    prompts.push_back(system);
    prompts.back().insert(prompts.back().end(), q.begin(), q.end());
  }
  SamplingParams p;
  p.max_tokens = 8;
  p.ignore_eos = true;
  EngineConfig uncached_config = SmallConfig();
  uncached_config.enable_prefix_caching = false;
  LLM uncached(testing::TinyModel(o, "sys-uncached"), uncached_config);
  LLM cached(testing::TinyModel(o, "sys-cached"), SmallConfig());
  std::vector<std::vector<int32_t>> expected, got;
  int64_t saved = 0;
  for (int round = 0; round < 2; ++round) {
    std::vector<std::vector<int32_t>> batch(prompts.begin() + round * 10, prompts.begin() + round * 10 + 10);
    auto a = uncached.Generate(batch, {p});
    auto b = cached.Generate(batch, {p});
    ASSERT_TRUE(a.ok() && b.ok());
    for (size_t i = 0; i < batch.size(); ++i) {
      expected.push_back((*a)[i].ids());
      got.push_back((*b)[i].ids());
      EXPECT_EQ((*a)[i].cached_tokens, 0);
      saved += (*b)[i].cached_tokens;
      if (round == 1) {
        // 17 full blocks of the 286-token prefix, and its last 14 tokens from the start of a block that followed them
        EXPECT_EQ((*b)[i].cached_tokens, 286) << i;
      }
    }
  }
  EXPECT_EQ(got, expected);
  const KVCacheStats& s = cached.engine().kv_manager().stats();
  // Round 1's first step prefills what fits in 256 tokens; every later request finds the prefix cached.
  EXPECT_GE(saved, 19 * 256);
  EXPECT_GE(s.blocks_shared, 19 * 16);
  EXPECT_LT(s.blocks_allocated, uncached.engine().kv_manager().stats().blocks_allocated / 3);
  std::printf("shared system prompt: %lld prompt tokens saved, %lld blocks allocated (uncached %lld), %lld shared\n",
              static_cast<long long>(saved), static_cast<long long>(s.blocks_allocated),
              static_cast<long long>(uncached.engine().kv_manager().stats().blocks_allocated),
              static_cast<long long>(s.blocks_shared));
}

TEST(Engine, StressRandomArrivalsAndCancellationsLeakNothing) {
  testing::TinyModelOptions o;
  o.hidden = 64;
  o.layers = 1;
  o.ffn = 128;
  o.vocab = 300;
  auto prompts = RandomPrompts(1000, 1, 48, 300, 77);
  std::mt19937_64 rng(78);
  std::vector<SamplingParams> params(prompts.size());
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].max_tokens = 1 + static_cast<int32_t>(rng() % 24);
    params[i].ignore_eos = true;
    params[i].temperature = (i % 3 == 0) ? 0.0f : 1.0f;
    params[i].seed = i;
    params[i].has_seed = true;
  }
  // Solo outputs come from a roomy engine (batch invariance makes them equal to one-at-a-time runs).
  LLM roomy(testing::TinyModel(o, "stress-ref"), SmallConfig(2048, 256, 2048));
  auto expected = roomy.Generate(prompts, params);
  ASSERT_TRUE(expected.ok());

  // The engine under test: a small pool, requests arriving over time, some cancelled mid-flight.
  auto model = testing::TinyModel(o, "stress");
  EngineConfig config = SmallConfig(/*blocks=*/40, /*max_seqs=*/32, /*max_tokens=*/96);
  Engine engine(*model, config);
  std::map<RequestId, size_t> index;
  std::map<size_t, std::vector<int32_t>> got;
  std::set<size_t> cancelled;
  size_t next = 0;
  int steps = 0;
  while (next < prompts.size() || engine.HasUnfinished()) {
    for (int k = static_cast<int>(rng() % 6); k > 0 && next < prompts.size(); --k, ++next) {
      auto id = engine.Add(prompts[next], params[next]);
      ASSERT_TRUE(id.ok()) << id.status().message();
      index[*id] = next;
    }
    if (rng() % 10 == 0 && !index.empty()) {
      auto it = index.begin();
      std::advance(it, static_cast<long>(rng() % index.size()));
      engine.Cancel(it->first);
      cancelled.insert(it->second);
    }
    for (RequestOutput& out : engine.Step()) {
      auto& ids = got[index.at(out.id)];
      ids.insert(ids.end(), out.new_tokens.begin(), out.new_tokens.end());
      if (out.finished) index.erase(out.id);
    }
    engine.CheckIntegrity();
    ++steps;
  }
  EXPECT_EQ(engine.kv_manager().num_free_blocks(), 40);
  size_t compared = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (cancelled.contains(i)) continue;
    EXPECT_EQ(got[i], (*expected)[i].ids()) << "request " << i;
    ++compared;
  }
  EXPECT_GT(compared, 800u);
  EXPECT_GT(engine.scheduler().num_preemptions(), 0);
}

TEST(Engine, NCopiesForkAfterThePromptAndShareItsBlocks) {
  testing::TinyModelOptions o;
  o.arch = Arch::kQwen3;
  o.gguf_type = DType::kQ8_0;
  std::vector<int32_t> prompt(40);  // 2 full blocks of 16 + 8 tokens in a partial block
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(7 * i % 500);
  SamplingParams p;
  p.n = 4;
  p.max_tokens = 10;
  p.ignore_eos = true;
  p.temperature = 1.0f;
  p.seed = 100;
  p.has_seed = true;
  // 1: no room to run the copies at once, so they wait and recompute. int8: the fork copies the partial block's
  // scales with its keys and values.
  for (auto [max_seqs, dtype] : {std::pair{64, KvDtype::kF32}, std::pair{1, KvDtype::kF32}, std::pair{64, KvDtype::kInt8}}) {
    SCOPED_TRACE(::testing::Message() << max_seqs << " seqs, " << KvDtypeName(dtype));
    EngineConfig config = SmallConfig(256, max_seqs);
    config.enable_prefix_caching = false;  // block sharing below comes from forking alone
    config.kv_cache_dtype = dtype;
    LLM llm(testing::TinyModel(o, "fork" + std::to_string(max_seqs)), config);
    auto forked = llm.Generate({prompt}, {p});
    ASSERT_TRUE(forked.ok()) << forked.status().message();
    ASSERT_EQ((*forked)[0].choices.size(), 4u);
    if (max_seqs == 64) {
      EXPECT_EQ(llm.engine().kv_manager().stats().blocks_shared, 3 * 2);
    }
    // Copy k equals a lone request with seed + k: forking changes nothing but the work done.
    for (int k = 0; k < 4; ++k) {
      SamplingParams single = p;
      single.n = 1;
      single.seed = p.seed + static_cast<uint64_t>(k);
      auto alone = llm.Generate({prompt}, {single});
      ASSERT_TRUE(alone.ok());
      EXPECT_EQ((*forked)[0].choices[static_cast<size_t>(k)].ids, (*alone)[0].ids()) << "copy " << k;
    }
    EXPECT_EQ(llm.engine().kv_manager().num_free_blocks(), 256);
    llm.engine().CheckIntegrity();
  }
}

// A hybrid model's state slots: with fewer slots (5) than max_num_seqs, a cache too small for every request (blocks
// run out: preemption frees the slot and the request recomputes from a reset state), prefill steps of at most 16
// tokens (two of the tiny model's SSD chunks, so steps end on chunk boundaries or wait: model/mamba_mixer.h) and
// cancellations mid-flight, every request that is not cancelled gives the tokens it gives alone, no slot or block
// leaks, and n = 3 copies fork from the parent's state (copy k equals a lone request with seed + k).
TEST(Engine, HybridStateSlotsSurvivePreemptionCancellationAndForks) {
  testing::TinyModelOptions o{Arch::kNemotronH, ModelFormat::kHfFolder, DType::kF32};
  auto prompts = RandomPrompts(24, 3, 50, 512, 31);
  std::vector<SamplingParams> params(prompts.size());
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].max_tokens = 6 + static_cast<int32_t>(i % 9);
    params[i].ignore_eos = true;
    params[i].temperature = i % 2 == 0 ? 0.0f : 0.8f;
    params[i].seed = 40 + i;
    params[i].has_seed = true;
  }
  LLM roomy(testing::TinyModel(o, "hybrid-ref"), SmallConfig());
  auto expected = roomy.Generate(prompts, params);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  EXPECT_FALSE(roomy.engine().kv_manager().pool().prefix_caching());  // off for hybrid models
  EXPECT_EQ(roomy.engine().kv_manager().num_state_slots(), 64);       // one per running request

  auto model = testing::TinyModel(o, "hybrid-squeezed");
  EngineConfig config = SmallConfig(/*blocks=*/9, /*max_seqs=*/16, /*max_tokens=*/16);
  config.num_state_slots = 5;
  Engine engine(*model, config);
  auto adapter = std::make_shared<LoraAdapter>();  // LoRA is refused for hybrid models (not supported yet)
  adapter->path = "some-adapter";
  adapter->layers.resize(static_cast<size_t>(model->config().n_layers));
  auto refused = engine.Add(prompts[0], params[0], 0, adapter);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("hybrid"), std::string::npos);
  std::map<RequestId, size_t> index;
  std::map<size_t, std::vector<int32_t>> got;
  std::set<size_t> cancelled;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto id = engine.Add(prompts[i], params[i]);
    ASSERT_TRUE(id.ok()) << id.status().message();
    index[*id] = i;
  }
  int steps = 0;
  while (engine.HasUnfinished()) {
    if (steps % 7 == 3 && !index.empty()) {  // cancel a running or waiting request now and then
      auto it = index.begin();
      std::advance(it, static_cast<long>(static_cast<size_t>(steps) % index.size()));
      engine.Cancel(it->first);
      cancelled.insert(it->second);
    }
    for (RequestOutput& out : engine.Step()) {
      auto& ids = got[index.at(out.id)];
      ids.insert(ids.end(), out.new_tokens.begin(), out.new_tokens.end());
      if (out.finished) index.erase(out.id);
    }
    engine.CheckIntegrity();
    EXPECT_LE(engine.scheduler().num_running(), 5);  // the state slots bound the running requests
    ++steps;
  }
  EXPECT_GT(engine.scheduler().num_preemptions(), 0);
  EXPECT_GE(cancelled.size(), 2u);
  EXPECT_EQ(engine.kv_manager().num_free_blocks(), 9);
  EXPECT_EQ(engine.kv_manager().num_free_state_slots(), 5);

  // From a budget (--kv-cache-gb): 7 states' worth holds 3 slots (half of it) of the 16 wanted, the rest KV blocks;
  // a budget that cannot hold one state beside a block refuses requests, naming the state's size.
  const double state = static_cast<double>(model->StateShape(1).BytesPerSlot());
  const double block = static_cast<double>(PagedKvStorage::BytesPerBlock(model->KvShape(1, 16, KvDtype::kF32)));
  EngineConfig budgeted = SmallConfig(/*blocks=*/0, /*max_seqs=*/16, /*max_tokens=*/8);
  budgeted.kv_cache_gb = 7 * state / (1ull << 30);
  {
    Engine e(*model, budgeted);
    EXPECT_EQ(e.kv_manager().num_state_slots(), 3);
    EXPECT_EQ(e.config().num_kv_blocks, static_cast<int32_t>(4 * state / block));
  }
  budgeted.kv_cache_gb = state / (1ull << 30);
  {
    Engine e(*model, budgeted);
    auto too_small = e.Add(prompts[0], params[0]);
    ASSERT_FALSE(too_small.ok());
    EXPECT_NE(too_small.status().message().find("recurrent state"), std::string::npos) << too_small.status().message();
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (!cancelled.contains(i)) {
      EXPECT_EQ(got[i], (*expected)[i].ids()) << "request " << i;
    }
  }

  // n > 1: the copies fork from the parent's state after the prompt.
  SamplingParams p;
  p.n = 3;
  p.max_tokens = 8;
  p.ignore_eos = true;
  p.temperature = 1.0f;
  p.seed = 7;
  p.has_seed = true;
  auto forked = roomy.Generate({prompts[0]}, {p});
  ASSERT_TRUE(forked.ok()) << forked.status().message();
  for (int k = 0; k < 3; ++k) {
    SamplingParams single = p;
    single.n = 1;
    single.seed = p.seed + static_cast<uint64_t>(k);
    auto alone = roomy.Generate({prompts[0]}, {single});
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ((*forked)[0].choices[static_cast<size_t>(k)].ids, (*alone)[0].ids()) << "copy " << k;
  }
  EXPECT_EQ(roomy.engine().kv_manager().num_free_state_slots(), 64);
  roomy.engine().CheckIntegrity();
}

TEST(Engine, CancellingARequestCancelsItsCopies) {
  testing::TinyModelOptions o;
  auto model = testing::TinyModel(o, "fork-cancel");
  Engine engine(*model, SmallConfig());
  SamplingParams p;
  p.n = 3;
  p.max_tokens = 50;
  p.ignore_eos = true;
  auto id = engine.Add({1, 2, 3, 4, 5}, p);
  ASSERT_TRUE(id.ok());
  engine.Step();  // prompt computed, copies forked
  EXPECT_EQ(engine.scheduler().num_running(), 3);
  engine.Cancel(*id);
  EXPECT_EQ(engine.scheduler().num_unfinished(), 0);  // finished at once...
  EXPECT_TRUE(engine.HasUnfinished());                // ...and the next step reports them
  auto outs = engine.Step();
  EXPECT_EQ(outs.size(), 3u);
  for (const auto& out : outs) EXPECT_EQ(out.request->finish_reason, FinishReason::kCancelled);
  EXPECT_FALSE(engine.HasUnfinished());
  EXPECT_EQ(engine.kv_manager().num_free_blocks(), 256);
}

TEST(LLM, TextStreamsAndStopStringsOnStories260K) {
  auto model = Model::Load(testing::FixturePath("models/stories260K/stories260K.bin"));
  ASSERT_TRUE(model.ok());
  auto tok = ReadLlama2cTokenizer(testing::FixturePath("models/stories260K/tok512.bin"));
  ASSERT_TRUE(tok.ok());
  auto tokenizer = std::make_shared<Tokenizer>(Tokenizer::FromLlama2c(*tok));
  LLM llm(std::move(*model), SmallConfig());
  llm.SetTokenizer(tokenizer);
  const std::vector<int32_t> prompt = tokenizer->Encode("Once upon a time", true, false);
  SamplingParams plain;
  plain.max_tokens = 40;
  SamplingParams stopping = plain;
  stopping.stop = {"Lily", "zzz"};
  std::map<size_t, std::string> streamed;
  auto done = llm.Generate({prompt, prompt}, {plain, stopping}, [&](const StreamEvent& e) {
    streamed[e.index] += e.new_text;
  });
  ASSERT_TRUE(done.ok()) << done.status().message();
  const Choice& full = (*done)[0].choices[0];
  const Choice& cut = (*done)[1].choices[0];
  EXPECT_EQ(full.text, tokenizer->Decode(full.ids, true).substr(0, full.text.size()));
  EXPECT_EQ(full.text.rfind(", there was a little girl named Lily.", 0), 0u) << full.text;
  EXPECT_EQ(cut.text, ", there was a little girl named ");
  EXPECT_EQ(cut.finish_reason, FinishReason::kStop);
  EXPECT_LT(cut.ids.size(), full.ids.size());
  EXPECT_EQ(streamed[0], full.text);  // the stream is the text, chunk by chunk
  EXPECT_EQ(streamed[1], cut.text);   // nothing of the stop string leaked into the stream
  EXPECT_EQ(llm.engine().kv_manager().num_free_blocks(), 256);
}

// Constrained decoding on stories260K (SentencePiece pieces and <0xNN> byte tokens): every output is complete
// JSON of the schema (or one of the choices), ends with finish_reason "stop" and its last token kept, and the
// batch gives exactly what each request gives alone (greedy and seeded sampling).
TEST(LLM, StructuredOutputsAreValidAndBatchInvariant) {
  auto model = Model::Load(testing::FixturePath("models/stories260K/stories260K.bin"));
  ASSERT_TRUE(model.ok());
  auto tok = ReadLlama2cTokenizer(testing::FixturePath("models/stories260K/tok512.bin"));
  ASSERT_TRUE(tok.ok());
  auto tokenizer = std::make_shared<Tokenizer>(Tokenizer::FromLlama2c(*tok));
  const int32_t vocab = (*model)->config().vocab;
  structured::GrammarCompiler compiler(structured::TokenVocab::FromTokenizer(*tokenizer, vocab));
  structured::StructuredOutput schema{structured::StructuredOutput::Kind::kJsonSchema,
                                      R"g({"type": "object", "properties": {"name": {"type": "string", "maxLength": 6},
                                          "age": {"type": "integer", "minimum": 0, "maximum": 120},
                                          "pet": {"enum": ["cat", "dog"]}}, "required": ["name", "age", "pet"],
                                          "additionalProperties": false})g",
                                      {}, "", ""};
  structured::StructuredOutput choice{structured::StructuredOutput::Kind::kChoice, "", {"yes", "no", "maybe"}, "", ""};
  auto json_grammar = compiler.Compile(schema);
  ASSERT_TRUE(json_grammar.ok()) << json_grammar.status().message();
  auto choice_grammar = compiler.Compile(choice);
  ASSERT_TRUE(choice_grammar.ok());
  LLM llm(std::move(*model), SmallConfig());
  llm.SetTokenizer(tokenizer);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SamplingParams> params;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(tokenizer->Encode(i % 2 ? "Once upon a time" : "Lily had a dog", true, false));
    SamplingParams p;
    p.max_tokens = 200;  // far more than the grammar needs: whitespace is bounded too
    p.grammar = i < 6 ? *json_grammar : *choice_grammar;
    if (i % 2 == 1) {
      p.temperature = 1.0f;
      p.seed = 7 + static_cast<uint64_t>(i);
      p.has_seed = true;
    }
    params.push_back(p);
  }
  auto batched = llm.Generate(prompts, params);
  ASSERT_TRUE(batched.ok()) << batched.status().message();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Choice& c = (*batched)[i].choices[0];
    EXPECT_EQ(c.finish_reason, FinishReason::kStop) << c.text;
    const std::string text = tokenizer->Decode(c.ids, true);
    structured::GrammarMatcher check(params[i].grammar);
    EXPECT_TRUE(check.AcceptBytes(text) && check.CanEnd()) << text;
    if (i < 6) {
      boost::system::error_code ec;
      boost::json::value v = boost::json::parse(text, ec);
      ASSERT_FALSE(ec) << text;
      EXPECT_TRUE(v.as_object().contains("name") && v.as_object().at("age").is_int64()) << text;
    } else {
      EXPECT_TRUE(text == "yes" || text == "no" || text == "maybe") << text;
    }
    auto alone = llm.Generate({prompts[i]}, {params[i]});
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ((*alone)[0].ids(), c.ids) << "request " << i;
  }
  EXPECT_EQ(llm.engine().kv_manager().num_free_blocks(), 256);
}

TEST(Engine, RejectsBadRequests) {
  testing::TinyModelOptions o;
  auto model = testing::TinyModel(o, "reject");
  Engine engine(*model, SmallConfig(4));
  SamplingParams p;
  EXPECT_FALSE(engine.Add({}, p).ok());
  EXPECT_FALSE(engine.Add({1, 99999}, p).ok());
  p.temperature = -1;
  EXPECT_FALSE(engine.Add({1, 2}, p).ok());
  p.temperature = 0;
  p.max_tokens = 1000;  // needs more than the 4 blocks of 16 this cache has
  auto r = engine.Add({1, 2}, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("KV blocks"), std::string::npos) << r.status().message();
  std::vector<int32_t> too_long(5000, 1);
  p.max_tokens = 1;
  EXPECT_FALSE(engine.Add(too_long, p).ok());
  EXPECT_FALSE(engine.HasUnfinished());
}

}  // namespace
}  // namespace parallm
