// ModelWriter pieces: RoPE row re-pairing and the GGUF type choices.
#include <gtest/gtest.h>

#include <cmath>

#include "formats/gguf.h"
#include "model/model_writer.h"
#include "model/synthetic.h"
#include "tensor/quant.h"
#include "tensor/random_rows.h"
#include "test_paths.h"

namespace parallm {
namespace {

TEST(PermuteRopeRows, MatchesConvertHfToGgufPermute) {
  // One head of dim 4, one column: HF rows [a0 a1 | b0 b1] pair (a_i, b_i); GGUF interleaves them.
  std::vector<float> hf = {0, 1, 2, 3};
  auto gguf = PermuteRopeRows(hf, 4, 1, 1, RopeStyle::kHalf, RopeStyle::kInterleaved);
  EXPECT_EQ(gguf, (std::vector<float>{0, 2, 1, 3}));
  EXPECT_EQ(PermuteRopeRows(gguf, 4, 1, 1, RopeStyle::kInterleaved, RopeStyle::kHalf), hf);
}

TEST(PermuteRopeRows, RoundTripsManyHeads) {
  std::vector<float> v(3 * 8 * 5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  auto p = PermuteRopeRows(v, 24, 5, 3, RopeStyle::kHalf, RopeStyle::kInterleaved);
  EXPECT_NE(p, v);
  EXPECT_EQ(PermuteRopeRows(p, 24, 5, 3, RopeStyle::kInterleaved, RopeStyle::kHalf), v);
}

TEST(ModelWriter, Q4KMMixesTypesAndFallsBackOnNarrowRows) {
  Arch arch = Arch::kQwen2;
  auto config = PresetConfig("tiny", &arch);
  ASSERT_TRUE(config.ok());
  config->hidden = 320;  // not a multiple of 256: K-quants fall back on matrices 320 wide
  config->n_heads = 5;
  config->n_kv_heads = 1;
  WriteOptions options;
  options.q4_k_m = true;
  ModelWriter writer(*config, RopeStyle::kHalf, options, Vocab::ByteLevel(config->vocab));
  ASSERT_TRUE(GenerateRandomWeights(*config, 1, [&](const std::string& n, std::vector<int64_t> s, std::vector<float> v) {
                return writer.Add(n, std::move(s), std::move(v));
              }).ok());
  std::string path = testing::ScratchDir("q4km") + "/m.gguf";
  ASSERT_TRUE(writer.Finish(path).ok());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  const TensorSet& t = file->tensors();
  EXPECT_EQ(t.Find("blk.0.ffn_down.weight")->dtype, DType::kQ4_K);   // 512 wide, first of 2 layers: q4_k
  EXPECT_EQ(t.Find("blk.1.ffn_down.weight")->dtype, DType::kQ6_K);   // last layer: q6_k
  EXPECT_EQ(t.Find("blk.0.ffn_gate.weight")->dtype, DType::kQ4_0);   // 320 wide: q4_k falls back to q4_0
  EXPECT_EQ(t.Find("blk.0.attn_output.weight")->dtype, DType::kQ4_0);
  EXPECT_EQ(t.Find("token_embd.weight")->dtype, DType::kQ8_0);       // tied LM head wants q6_k, 320 wide: q8_0
  EXPECT_EQ(t.Find("blk.0.attn_norm.weight")->dtype, DType::kF32);
}

// make-model --fast: the types Add would choose, values spread as GenerateRandomWeights spreads them (uniform with
// standard deviation 1/sqrt(cols)), and rows that do not depend on how the rows are cut over threads.
TEST(ModelWriter, FastRandomModelHasTheTypesAndSpreadOfTheSlowOne) {
  Arch arch = Arch::kQwen3Moe;
  auto config = PresetConfig("tiny", &arch);
  ASSERT_TRUE(config.ok());
  WriteOptions options;
  options.gguf_type = DType::kQ4_K;
  const std::string path = testing::ScratchDir("fast") + "/m.gguf";
  Status st = WriteFastRandomModel(*config, options, Vocab::ByteLevel(config->vocab), 1, path);
  ASSERT_TRUE(st.ok()) << st.message();
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  const TensorSet& t = file->tensors();
  EXPECT_EQ(t.Find("blk.0.ffn_gate_exps.weight")->dtype, DType::kQ4_K);  // 256 wide
  EXPECT_EQ(t.Find("blk.0.ffn_down_exps.weight")->dtype, DType::kQ4_0);  // expert_ffn 128: q4_k falls back
  EXPECT_EQ(t.Find("blk.0.ffn_gate_inp.weight")->dtype, DType::kF32);    // the router stays f32
  EXPECT_EQ(t.Find("blk.1.attn_norm.weight")->dtype, DType::kF32);
  for (const char* name : {"blk.0.ffn_gate_exps.weight", "blk.0.ffn_down_exps.weight", "blk.1.ffn_gate_inp.weight"}) {
    const TensorView* v = t.Find(name);
    const int64_t cols = v->shape.back(), rows = v->NumElements() / cols;
    std::vector<float> x(static_cast<size_t>(rows * cols));
    DequantizeRow(v->dtype, v->data, x.data(), rows * cols);
    double sum = 0, sq = 0;
    for (float f : x) sum += f, sq += static_cast<double>(f) * f;
    const double mean = sum / static_cast<double>(x.size()), sd = std::sqrt(sq / static_cast<double>(x.size()) - mean * mean);
    const double want = 1.0 / std::sqrt(static_cast<double>(cols));
    EXPECT_LT(std::abs(mean), 0.05 * want) << name;
    EXPECT_NEAR(sd, want, 0.1 * want) << name;
  }
  for (DType type : {DType::kQ4_K, DType::kQ4_0, DType::kQ8_0, DType::kQ6_K, DType::kF16}) {
    const int64_t cols = 512, rows = 9;
    const size_t rb = RowBytes(type, cols);
    std::vector<uint8_t> whole(rb * rows), split(rb * rows);
    RandomRows(type, cols, 0.5f, 42, 0, rows, whole.data());
    RandomRows(type, cols, 0.5f, 42, 0, 4, split.data());
    RandomRows(type, cols, 0.5f, 42, 4, rows, split.data() + 4 * rb);
    EXPECT_EQ(whole, split) << Name(type);
  }
}

}  // namespace
}  // namespace parallm
