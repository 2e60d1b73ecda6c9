// Speculative decoding with a draft model: the config read from vLLM's JSON, vocabularies checked, and the engine's
// output with a draft model equal to its output without one, greedy and seeded, for the trained stories260K: drafting
// for itself (every greedy draft accepted), a Q4_0 copy of itself (accepts some, rejects some), a random draft
// (rejects nearly all); through cancellation, preemption and chunked prefill, with the draft's cache freed at the end.
#include <gtest/gtest.h>

#include "engine/llm.h"
#include "engine/speculation.h"
#include "model/model_writer.h"
#include "model/synthetic_model.h"
#include "test_models.h"

namespace parallm {
namespace {

TEST(DraftModelConfig, ParsesVllmsForms) {
  auto inferred = ParseSpeculativeConfig(R"({"model": "draft.gguf", "num_speculative_tokens": 3})");
  ASSERT_TRUE(inferred.ok()) << inferred.status().message();
  EXPECT_TRUE(inferred->uses_draft_model());
  EXPECT_EQ(inferred->model, "draft.gguf");
  EXPECT_EQ(inferred->num_speculative_tokens, 3);
  auto named = ParseSpeculativeConfig(R"({"method": "draft_model", "model": "synthetic:tiny", "num_speculative_tokens": 2})");
  ASSERT_TRUE(named.ok());
  EXPECT_TRUE(named->uses_draft_model());
  auto old_ngram = ParseSpeculativeConfig(R"({"model": "[ngram]", "num_speculative_tokens": 2})");
  ASSERT_TRUE(old_ngram.ok());
  EXPECT_EQ(old_ngram->method, SpeculativeConfig::Method::kNgram);
  auto no_model = ParseSpeculativeConfig(R"({"method": "draft_model", "num_speculative_tokens": 2})");
  ASSERT_FALSE(no_model.ok());
  EXPECT_NE(no_model.status().message().find("\"model\""), std::string::npos);
  auto ngram_model = ParseSpeculativeConfig(R"({"method": "ngram", "model": "x.gguf", "num_speculative_tokens": 2})");
  EXPECT_FALSE(ngram_model.ok());
  auto eagle = ParseSpeculativeConfig(R"({"method": "eagle", "model": "x", "num_speculative_tokens": 2})");
  ASSERT_FALSE(eagle.ok());
  EXPECT_NE(eagle.status().message().find("draft model"), std::string::npos);
}

TEST(DraftModelConfig, RefusesAnotherVocabulary) {
  auto target = Model::Load(testing::FixturePath("models/stories260K/stories260K.bin"));  // 512 tokens
  ASSERT_TRUE(target.ok());
  SpeculativeConfig spec;
  spec.method = SpeculativeConfig::Method::kDraftModel;
  spec.num_speculative_tokens = 2;
  spec.model = testing::FixturePath("models/llama-2-tiny-random/llama-2-tiny-random.gguf");  // 32,000 tokens
  auto other = LoadDraftModel(spec, **target);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("vocabulary has 32000 tokens and the target's 512"), std::string::npos)
      << other.status().message();
  spec.model = "/nonexistent/draft.gguf";
  auto missing = LoadDraftModel(spec, **target);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("draft model"), std::string::npos);
  spec.model = "synthetic:tiny";  // a random model with the same number of tokens (and no vocabulary of its file)
  EXPECT_TRUE(LoadDraftModel(spec, **target).ok());
}

EngineConfig Config(std::shared_ptr<Model> draft, int k = 4, int blocks = 64, int max_batched = 256) {
  EngineConfig c;
  c.num_kv_blocks = blocks;
  c.block_size = 16;
  c.threads = 2;
  c.scheduler.max_num_seqs = 16;
  c.scheduler.max_num_batched_tokens = max_batched;
  if (draft != nullptr) {
    c.scheduler.speculative.method = SpeculativeConfig::Method::kDraftModel;
    c.scheduler.speculative.model = "test draft";
    c.scheduler.speculative.num_speculative_tokens = k;
    c.draft_model = std::move(draft);
  }
  return c;
}

std::string Stories260KPath() { return testing::FixturePath("models/stories260K/stories260K.bin"); }

std::unique_ptr<LLM> Stories260K(std::shared_ptr<Model> draft, int k = 4, int blocks = 64, int max_batched = 256) {
  auto llm = LLM::Load(Stories260KPath(), Config(std::move(draft), k, blocks, max_batched));
  EXPECT_TRUE(llm.ok()) << llm.status().message();
  return llm.ok() ? std::move(*llm) : nullptr;
}

// stories260K with its weights rounded to Q4_0, in memory: it predicts what the original does most of the time.
std::shared_ptr<Model> Stories260KQ4() {
  auto loaded = LoadModel(Stories260KPath());
  EXPECT_TRUE(loaded.ok());
  WriteOptions options;
  options.format = ModelFormat::kGguf;
  options.gguf_type = DType::kQ4_0;
  ModelWriter writer(loaded->config, loaded->config.rope_style, options, Vocab::ByteLevel(loaded->config.vocab));
  const Status st = EmitWeights(loaded->config, loaded->weights,
                                [&](const std::string& name, std::vector<int64_t> shape, std::vector<float> values) {
                                  return writer.Add(name, std::move(shape), std::move(values));
                                });
  EXPECT_TRUE(st.ok()) << st.message();
  auto model = writer.FinishInMemory("stories260K q4_0");
  EXPECT_TRUE(model.ok()) << model.status().message();
  return std::make_shared<Model>(std::move(*model));
}

// BOS, then random word pieces (ids past the byte tokens).
std::vector<std::vector<int32_t>> Prompts(int n, uint64_t seed, int min_len = 8, int spread = 24) {
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(n));
  uint64_t x = seed;
  auto next = [&x](uint64_t range) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int32_t>((x >> 33) % range);
  };
  for (auto& p : prompts) {
    p.assign(1, 1);
    for (int i = min_len + next(static_cast<uint64_t>(spread)); i > 0; --i) p.push_back(259 + next(512 - 259));
  }
  return prompts;
}

// Even requests greedy, odd ones seeded sampling; some with logprobs and a penalty.
std::vector<SamplingParams> Mixed(size_t n, int max_tokens = 16) {
  std::vector<SamplingParams> params(n);
  for (size_t i = 0; i < n; ++i) {
    params[i].max_tokens = max_tokens - static_cast<int32_t>(i % 4);
    params[i].ignore_eos = true;
    if (i % 2 == 1) {
      params[i].temperature = 0.8f;
      params[i].seed = 40 + i;
      params[i].has_seed = true;
    }
    if (i % 3 == 2) params[i].logprobs = 1;
    if (i % 5 == 4) params[i].repetition_penalty = 1.2f;
  }
  return params;
}

void ExpectSame(const std::vector<Completion>& got, const std::vector<Completion>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].ids(), want[i].ids()) << what << ", prompt " << i;
    EXPECT_EQ(got[i].finish_reason(), want[i].finish_reason()) << what << ", prompt " << i;
    ASSERT_EQ(got[i].choices[0].samples.size(), want[i].choices[0].samples.size());
    for (size_t j = 0; j < got[i].choices[0].samples.size(); ++j)
      EXPECT_NEAR(got[i].choices[0].samples[j].logprob, want[i].choices[0].samples[j].logprob, 1e-4f);
  }
}

void ExpectDraftCacheEmpty(const Engine& engine) {
  ASSERT_NE(engine.draft_model(), nullptr);
  EXPECT_EQ(engine.draft_model()->num_cached_requests(), 0);
  EXPECT_EQ(engine.draft_model()->kv_manager().num_free_blocks(), engine.config().num_kv_blocks);
  engine.draft_model()->kv_manager().CheckIntegrity();
}

TEST(DraftModel, TargetDraftingForItselfIsAlwaysAcceptedGreedy) {
  const auto prompts = Prompts(6, 1);
  const auto params = Mixed(prompts.size());
  auto plain = Stories260K(nullptr);
  auto want = plain->Generate(prompts, params);
  ASSERT_TRUE(want.ok());
  auto self = Model::Load(Stories260KPath());
  ASSERT_TRUE(self.ok());
  auto spec = Stories260K(std::move(*self), 3);
  auto got = spec->Generate(prompts, params);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ExpectSame(*got, *want, "identical draft");
  // Greedy requests without penalties: the target's choice is the draft's every time (the model is batch invariant:
  // a row of a 4-token verification equals the draft's one-token step).
  SamplingParams greedy;
  greedy.max_tokens = 16;
  greedy.ignore_eos = true;
  const Scheduler::SpecStats before = spec->engine().scheduler().spec_stats();
  auto greedy_got = spec->Generate(prompts, {greedy});
  ASSERT_TRUE(greedy_got.ok());
  auto greedy_want = plain->Generate(prompts, {greedy});
  ASSERT_TRUE(greedy_want.ok());
  ExpectSame(*greedy_got, *greedy_want, "identical draft, greedy");
  const Scheduler::SpecStats& after = spec->engine().scheduler().spec_stats();
  EXPECT_GT(after.num_draft_tokens, before.num_draft_tokens);
  EXPECT_EQ(after.num_accepted_tokens - before.num_accepted_tokens, after.num_draft_tokens - before.num_draft_tokens);
  ExpectDraftCacheEmpty(spec->engine());
  spec->engine().CheckIntegrity();
}

// A Q4_0 copy of the target agrees often, not always: steps accept part of a draft, and the draft's cache rolls back
// to what was accepted.
TEST(DraftModel, QuantizedDraftKeepsGreedyAndSeededOutputsAmongConcurrentRequests) {
  const auto prompts = Prompts(12, 2);
  const auto params = Mixed(prompts.size());
  auto plain = Stories260K(nullptr);
  auto want = plain->Generate(prompts, params);
  ASSERT_TRUE(want.ok());
  const std::shared_ptr<Model> draft = Stories260KQ4();
  auto spec = Stories260K(draft);
  auto got = spec->Generate(prompts, params);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ExpectSame(*got, *want, "q4_0 draft");
  const Scheduler::SpecStats& s = spec->engine().scheduler().spec_stats();
  EXPECT_GT(s.num_accepted_tokens, 0);
  EXPECT_LT(s.num_accepted_tokens, s.num_draft_tokens);
  ExpectDraftCacheEmpty(spec->engine());

  // Alone, a request gives the same again (its draft depends only on its own tokens).
  auto alone = spec->Generate({prompts[5]}, {params[5]});
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ((*alone)[0].ids(), (*want)[5].ids());

  // Too few blocks for all twelve (preemption, and drafts dropped for want of room) and 24 tokens a step (prompts,
  // and the draft's first pass over them, in chunks): the same outputs, both caches empty at the end.
  auto squeezed = Stories260K(draft, 4, /*blocks=*/6, /*max_batched=*/24);
  auto tight = squeezed->Generate(prompts, params);
  ASSERT_TRUE(tight.ok()) << tight.status().message();
  ExpectSame(*tight, *want, "preempted and chunked");
  EXPECT_GT(squeezed->engine().scheduler().num_preemptions(), 0);
  EXPECT_GT(squeezed->engine().scheduler().spec_stats().num_accepted_tokens, 0);
  ExpectDraftCacheEmpty(squeezed->engine());
  EXPECT_EQ(squeezed->engine().kv_manager().num_free_blocks(), 6);
  squeezed->engine().CheckIntegrity();
}

TEST(DraftModel, CancelledAndStoppedRequestsFreeTheDraftCache) {
  const auto prompts = Prompts(4, 3);
  const auto params = Mixed(prompts.size(), 20);
  auto plain = Stories260K(nullptr);
  auto want = plain->Generate(prompts, params);
  ASSERT_TRUE(want.ok());
  auto spec = Stories260K(Stories260KQ4());
  Engine& engine = spec->engine();
  std::vector<RequestId> ids;
  for (size_t i = 0; i < prompts.size(); ++i) ids.push_back(*engine.Add(prompts[i], params[i]));
  std::vector<std::vector<int32_t>> out(prompts.size());
  for (int step = 0; engine.HasUnfinished(); ++step) {
    if (step == 3) {  // decoding, with their drafts in the draft's cache: cancel one request, stop another
      EXPECT_EQ(engine.draft_model()->num_cached_requests(), 4);
      engine.Cancel(ids[1]);
      engine.Stop(ids[2]);
    }
    for (const RequestOutput& o : engine.Step()) {
      const size_t i = static_cast<size_t>(std::find(ids.begin(), ids.end(), o.id) - ids.begin());
      out[i].insert(out[i].end(), o.new_tokens.begin(), o.new_tokens.end());
    }
    engine.CheckIntegrity();
  }
  EXPECT_EQ(out[0], (*want)[0].ids());
  EXPECT_EQ(out[3], (*want)[3].ids());
  for (size_t i : {1u, 2u}) {  // cut short: a prefix of the output without cancellation
    EXPECT_LT(out[i].size(), (*want)[i].ids().size());
    EXPECT_TRUE(std::equal(out[i].begin(), out[i].end(), (*want)[i].ids().begin()));
  }
  ExpectDraftCacheEmpty(engine);
}

// A random-weight draft for the trained stories260K: it rarely guesses right, and the output is unchanged.
TEST(DraftModel, RandomDraftForTrainedTargetKeepsOutputs) {
  auto draft = BuildSyntheticModel("synthetic:tiny");
  ASSERT_TRUE(draft.ok());
  const auto prompts = Prompts(4, 4);
  const auto params = Mixed(prompts.size(), 20);
  auto plain = Stories260K(nullptr);
  auto want = plain->Generate(prompts, params);
  ASSERT_TRUE(want.ok());
  auto spec = Stories260K(std::move(*draft));
  auto got = spec->Generate(prompts, params);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ExpectSame(*got, *want, "random draft");
  const Scheduler::SpecStats& s = spec->engine().scheduler().spec_stats();
  EXPECT_GT(s.num_draft_tokens, 0);
  EXPECT_LT(s.num_accepted_tokens * 4, s.num_draft_tokens);  // a quarter at most: mostly rejected
  ExpectDraftCacheEmpty(spec->engine());
}

}  // namespace
}  // namespace parallm
