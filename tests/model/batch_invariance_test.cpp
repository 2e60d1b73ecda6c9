// Batch invariance at the model level: logits of a sequence computed inside a mixed batch (other sequences'
// prefill chunks and decode tokens, scattered KV blocks) equal, bit for bit, the logits computed alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "kernels/cpu_features.h"
#include "model/model.h"
#include "test_models.h"

namespace parallm {
namespace {

struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;  // block table
};

constexpr int kBlock = 4;

// Runs `seq.tokens[begin, end)` of each sequence in one batch; returns the logits of each sequence's last token.
std::vector<std::vector<float>> RunBatch(Model& model, PagedKvStorage& kv, const std::vector<Seq>& seqs,
                                         const std::vector<std::pair<int, int>>& ranges, ThreadPool* pool) {
  std::vector<int32_t> tokens, positions, logits_indices;
  std::vector<int64_t> slots;
  ForwardBatch batch;
  for (size_t s = 0; s < seqs.size(); ++s) {
    auto [begin, end] = ranges[s];
    SequenceSlice slice{static_cast<int32_t>(tokens.size()), end - begin, end, seqs[s].blocks,
                        static_cast<int32_t>(seqs[s].tokens.size())};
    for (int p = begin; p < end; ++p) {
      tokens.push_back(seqs[s].tokens[static_cast<size_t>(p)]);
      positions.push_back(p);
      slots.push_back(static_cast<int64_t>(seqs[s].blocks[static_cast<size_t>(p / kBlock)]) * kBlock + p % kBlock);
    }
    batch.sequences.push_back(slice);
    logits_indices.push_back(static_cast<int32_t>(tokens.size()) - 1);
  }
  batch.tokens = tokens;
  batch.positions = positions;
  batch.slot_mapping = slots;
  batch.logits_indices = logits_indices;
  const int vocab = model.config().vocab;
  std::vector<float> logits(logits_indices.size() * static_cast<size_t>(vocab));
  model.Forward(batch, kv, logits.data(), pool);
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < logits_indices.size(); ++i)
    out.emplace_back(logits.begin() + static_cast<std::ptrdiff_t>(i * vocab),
                     logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * vocab));
  return out;
}

// Three sequences in uneven chunks and a mixed decode/prefill step, against each alone.
void ExpectMixedBatchEqualsAlone(Model* model) {
  ASSERT_NE(model, nullptr);
  ThreadPool pool(2);
  // Three sequences with scattered, non-contiguous blocks.
  std::vector<Seq> seqs = {
      {{5, 17, 300, 42, 7, 99, 100, 3, 250, 11}, {7, 2, 9}},
      {{1, 2, 3, 4, 5, 6, 7}, {0, 5}},
      {{480, 12, 33, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73}, {1, 3, 4, 8}},
  };
  // Alone: each sequence's prompt in one step, then its last token as a decode step.
  std::vector<std::vector<float>> alone;
  for (const Seq& s : seqs) {
    PagedKvStorage kv(model->KvShape(10, kBlock));
    int n = static_cast<int>(s.tokens.size());
    RunBatch(*model, kv, {s}, {{0, n - 1}}, nullptr);
    alone.push_back(RunBatch(*model, kv, {s}, {{n - 1, n}}, nullptr)[0]);
  }
  // Together: uneven prefill chunks in the first step, then a mixed step where one sequence decodes and
  // the others finish their prompts; threads on.
  PagedKvStorage kv(model->KvShape(10, kBlock));
  RunBatch(*model, kv, seqs, {{0, 9}, {0, 3}, {0, 5}}, &pool);
  auto together = RunBatch(*model, kv, seqs, {{9, 10}, {3, 7}, {5, 13}}, &pool);
  for (size_t s = 0; s < seqs.size(); ++s) EXPECT_EQ(together[s], alone[s]) << "sequence " << s;
}

// Ten sequences decoding in one step with threads, enough that each decode token's KV heads share one task
// (Model::Attention), beside an eleventh sequence's prompt, against each alone.
void ExpectManyDecodeTokensEqualAlone(Model* model) {
  ASSERT_NE(model, nullptr);
  ThreadPool pool(2);
  constexpr int kSeqs = 11, kBlocks = 48;
  std::vector<int32_t> free_blocks(kBlocks);
  for (int b = 0; b < kBlocks; ++b) free_blocks[static_cast<size_t>(b)] = (b * 29) % kBlocks;  // scattered
  std::vector<Seq> seqs(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    const int n = 5 + (s * 7) % 8;  // 5 to 12 tokens
    for (int i = 0; i < n; ++i) seqs[static_cast<size_t>(s)].tokens.push_back((s * 131 + i * 17) % 500 + 1);
    for (int b = 0; b < (n + kBlock - 1) / kBlock; ++b) {
      seqs[static_cast<size_t>(s)].blocks.push_back(free_blocks.back());
      free_blocks.pop_back();
    }
  }
  std::vector<std::vector<float>> alone;
  for (const Seq& s : seqs) {
    PagedKvStorage kv(model->KvShape(kBlocks, kBlock));
    const int n = static_cast<int>(s.tokens.size());
    RunBatch(*model, kv, {s}, {{0, n - 1}}, nullptr);
    alone.push_back(RunBatch(*model, kv, {s}, {{n - 1, n}}, nullptr)[0]);
  }
  PagedKvStorage kv(model->KvShape(kBlocks, kBlock));
  std::vector<std::pair<int, int>> prompts, step;
  for (int s = 0; s + 1 < kSeqs; ++s) {
    const int n = static_cast<int>(seqs[static_cast<size_t>(s)].tokens.size());
    prompts.push_back({0, n - 1});
    step.push_back({n - 1, n});
  }
  std::vector<Seq> decoding(seqs.begin(), seqs.end() - 1);
  RunBatch(*model, kv, decoding, prompts, &pool);
  step.push_back({0, static_cast<int>(seqs.back().tokens.size())});  // the last sequence's whole prompt
  auto together = RunBatch(*model, kv, seqs, step, &pool);
  for (size_t s = 0; s < seqs.size(); ++s) EXPECT_EQ(together[s], alone[s]) << "sequence " << s;
}

class BatchInvariance : public ::testing::TestWithParam<std::tuple<Arch, DType>> {
 protected:
  // The tiny model of the parameters' family, its weights stored as their type.
  static auto Tiny(std::tuple<Arch, DType> param) {
    auto [arch, type] = param;
    testing::TinyModelOptions options;
    options.arch = arch;
    options.gguf_type = type;
    return testing::TinyModel(options, ArchName(arch) + std::string(Name(type)));
  }
};

TEST_P(BatchInvariance, MixedBatchEqualsAlone) { ExpectMixedBatchEqualsAlone(Tiny(GetParam()).get()); }

TEST_P(BatchInvariance, ManyDecodeTokensEqualAlone) { ExpectManyDecodeTokensEqualAlone(Tiny(GetParam()).get()); }

// The families with their own blocks and RoPE, with sliding windows shorter than every prompt (5 positions; the
// prompts have 7 to 13 tokens), LongRoPE switching to its long factors past 8 positions, partial rotary.
class FamilyBatchInvariance : public ::testing::TestWithParam<std::tuple<Arch, DType>> {};

TEST_P(FamilyBatchInvariance, MixedBatchEqualsAlone) {
  auto [arch, type] = GetParam();
  testing::TinyModelOptions options;
  options.arch = arch;
  options.gguf_type = type;
  options.sliding_window = 5;
  if (arch == Arch::kGemma3) options.layers = 6;  // five windowed layers and a global one
  if (arch == Arch::kPhi3) options.longrope_original = 8, options.partial_rotary = 0.75f;
  ExpectMixedBatchEqualsAlone(testing::TinyModel(options, "family-" + ArchName(arch) + std::string(Name(type))).get());
}

// Weights repacked at load (the default) give the same logits, bit for bit, as the stored form read in place
// (PARALLM_REPACK=0), on a mixed batch with threads: Q8_0, Q4_K / Q6_K mixes, Q4_0 and MLX 4 and 8 bit. The repacked
// model has dropped its stored matrices' pages from resident memory (their rows span whole pages at this width), and
// its lookups of the token embedding, a tied LM head's rows, map them in again.
// make-model --fast's streamed random blocks (Q4_K experts, Q4_0 where rows are too narrow for K-quants) make a model
// that loads, gives finite logits that differ token to token, and keeps batch invariance.
TEST(FastRandomModel, LoadsRunsAndStaysBatchInvariant) {
  Arch arch = Arch::kQwen3Moe;
  auto config = PresetConfig("tiny", &arch);
  ASSERT_TRUE(config.ok());
  WriteOptions options;
  options.gguf_type = DType::kQ4_K;
  const std::string path = testing::ScratchDir("fast-random") + "/model.gguf";
  Status st = WriteFastRandomModel(*config, options, Vocab::ByteLevel(config->vocab), 7, path);
  ASSERT_TRUE(st.ok()) << st.message();
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  PagedKvStorage kv((*model)->KvShape(4, kBlock));
  const Seq seq{{5, 17, 300, 42}, {0}};
  auto logits = RunBatch(**model, kv, {seq}, {{0, 4}}, nullptr)[0];
  float lo = logits[0], hi = logits[0];
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  EXPECT_GT(hi - lo, 1.0f);
  ExpectMixedBatchEqualsAlone(model->get());
}

TEST(Repack, RepackedModelEqualsStoredForm) {
  struct Case {
    ModelFormat format;
    DType type;
    int mlx_bits;
  };
  for (const Case& c : {Case{ModelFormat::kGguf, DType::kQ8_0, 0}, Case{ModelFormat::kGguf, DType::kQ4_K, 0},
                        Case{ModelFormat::kGguf, DType::kQ4_0, 0}, Case{ModelFormat::kGguf, DType::kQ6_K, 0},
                        Case{ModelFormat::kMlxFolder, DType::kF32, 4}, Case{ModelFormat::kMlxFolder, DType::kF32, 8}}) {
    testing::TinyModelOptions options;
    options.arch = Arch::kQwen2;
    options.format = c.format;
    options.gguf_type = c.type;
    options.mlx_bits = c.mlx_bits;
    options.hidden = 256;
    options.ffn = 1024;
    const std::string name = "repack" + std::string(Name(c.type)) + std::to_string(c.mlx_bits);
    auto packed = testing::TinyModel(options, name);
    setenv("PARALLM_REPACK", "0", 1);
    auto stored = testing::TinyModel(options, name + "-stored");
    unsetenv("PARALLM_REPACK");
    ASSERT_NE(packed, nullptr);
    ASSERT_NE(stored, nullptr);
    // Every path but the scalar twin (PARALLM_ISA=scalar) repacks these weights.
    if (ActiveIsa() != IsaPath::kScalar) {
      EXPECT_GT(packed->released_stored_bytes(), 0u) << name;
    }
    EXPECT_EQ(stored->released_stored_bytes(), 0u) << name;
    ThreadPool pool(2);
    std::vector<Seq> seqs = {{{5, 17, 300, 42, 7, 99, 100, 3, 250, 11}, {7, 2, 9}}, {{1, 2, 3, 4, 5}, {0, 5}}};
    std::vector<std::vector<std::vector<float>>> out;
    for (Model* m : {packed.get(), stored.get()}) {
      PagedKvStorage kv(m->KvShape(10, kBlock));
      RunBatch(*m, kv, seqs, {{0, 9}, {0, 4}}, &pool);
      out.push_back(RunBatch(*m, kv, seqs, {{9, 10}, {4, 5}}, &pool));
    }
    for (size_t s = 0; s < seqs.size(); ++s) EXPECT_EQ(out[0][s], out[1][s]) << name << " sequence " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, FamilyBatchInvariance,
                         ::testing::Combine(::testing::Values(Arch::kMistral, Arch::kGemma, Arch::kGemma2,
                                                              Arch::kGemma3, Arch::kPhi3),
                                            ::testing::Values(DType::kF32, DType::kQ8_0)),
                         [](const auto& info) {
                           return ArchName(std::get<0>(info.param)) + "_" + std::string(Name(std::get<1>(info.param)));
                         });

// Mixture-of-experts families: each token's experts run in groups whose make-up depends on the batch.
INSTANTIATE_TEST_SUITE_P(Moe, BatchInvariance,
                         ::testing::Combine(::testing::Values(Arch::kQwen2Moe, Arch::kQwen3Moe, Arch::kMixtral),
                                            ::testing::Values(DType::kF32, DType::kQ4_K)),
                         [](const auto& info) {
                           return ArchName(std::get<0>(info.param)) + "_" + std::string(Name(std::get<1>(info.param)));
                         });

INSTANTIATE_TEST_SUITE_P(Types, BatchInvariance,
                         ::testing::Combine(::testing::Values(Arch::kLlama, Arch::kQwen2, Arch::kQwen3),
                                            ::testing::Values(DType::kF32, DType::kQ8_0, DType::kQ4_K)),
                         [](const auto& info) {
                           return ArchName(std::get<0>(info.param)) + "_" + std::string(Name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace parallm
