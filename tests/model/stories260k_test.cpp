// stories260K (a real trained llama2.c model): greedy decoding from BOS reproduces llama2.c's documented
// sample token for token, from the checkpoint itself and from its GGUF and safetensors conversions.
#include <filesystem>

#include <gtest/gtest.h>

#include "engine/sampler.h"
#include "engine/single_sequence.h"
#include "formats/llama2c.h"
#include "model/model.h"
#include "model/model_writer.h"
#include "test_paths.h"

namespace parallm {
namespace {

// karpathy/llama2.c doc/stories260K.md, temperature 0 from BOS.
constexpr const char* kDocumentedSample =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.";

std::string Checkpoint() { return testing::FixturePath("models/stories260K/stories260K.bin"); }
Vocab StoriesVocab() {
  auto tok = ReadLlama2cTokenizer(testing::FixturePath("models/stories260K/tok512.bin"));
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return Vocab::FromLlama2c(*tok);
}

std::vector<int32_t> GreedyFromBos(const std::string& path, int n, KvDtype kv_dtype = KvDtype::kF32,
                                   std::vector<float>* last_logits = nullptr) {
  auto model = Model::Load(path);
  EXPECT_TRUE(model.ok()) << model.status().message();
  if (!model.ok()) return {};
  ThreadPool pool(2);
  SingleSequence seq(**model, n + 1, &pool, kv_dtype);
  std::vector<int32_t> out;
  int32_t token = 1;  // BOS
  for (int i = 0; i < n; ++i) {
    std::vector<float> logits = seq.Append(std::span<const int32_t>(&token, 1));
    token = ArgMax(logits);
    out.push_back(token);
    if (last_logits) *last_logits = std::move(logits);
  }
  return out;
}

std::string Convert(ModelFormat format, const std::string& name, DType gguf_type = DType::kF32) {
  auto loaded = LoadModel(Checkpoint());
  EXPECT_TRUE(loaded.ok()) << loaded.status().message();
  WriteOptions options;
  options.format = format;
  options.gguf_type = gguf_type;
  options.float_type = DType::kF32;
  std::string out = testing::ScratchDir("stories") + "/" + name;
  ModelWriter writer(loaded->config, loaded->config.rope_style, options, StoriesVocab());
  Status st = EmitWeights(loaded->config, loaded->weights, [&](const std::string& n, std::vector<int64_t> shape,
                                                               std::vector<float> values) {
    return writer.Add(n, std::move(shape), std::move(values));
  });
  EXPECT_TRUE(st.ok()) << st.message();
  st = writer.Finish(out);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

TEST(Stories260K, GreedyFromBosMatchesLlama2cSample) {
  std::vector<int32_t> ids = GreedyFromBos(Checkpoint(), 40);
  std::string text = StoriesVocab().Decode(ids);
  EXPECT_EQ(text.substr(0, std::string(kDocumentedSample).size()), kDocumentedSample) << text;
}

// Keys and values stored as f16, bf16 or int8 (--kv-cache-dtype) change the logits a little and the story not at all.
TEST(Stories260K, CompressedKvCacheKeepsTheSample) {
  std::vector<float> exact_logits;
  const std::vector<int32_t> exact = GreedyFromBos(Checkpoint(), 40, KvDtype::kF32, &exact_logits);
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kBf16, KvDtype::kInt8}) {
    SCOPED_TRACE(KvDtypeName(dtype));
    std::vector<float> logits;
    const std::vector<int32_t> ids = GreedyFromBos(Checkpoint(), 40, dtype, &logits);
    const std::string text = StoriesVocab().Decode(ids);
    EXPECT_EQ(text.substr(0, std::string(kDocumentedSample).size()), kDocumentedSample) << text;
    EXPECT_NE(logits, exact_logits);  // the cache really held the other type
  }
}

// A quantized model's cache stores f16 by default (--kv-cache-dtype auto), an f32 model's f32: stories260K in Q8_0
// tells the f32 cache's story token for token with it.
TEST(Stories260K, QuantizedModelCachesF16ByDefaultAndTellsTheSameStory) {
  const std::string gguf = Convert(ModelFormat::kGguf, "stories260K-q8_0.gguf", DType::kQ8_0);
  auto quantized = Model::Load(gguf);
  ASSERT_TRUE(quantized.ok()) << quantized.status().message();
  EXPECT_EQ((*quantized)->AutoKvDtype(), KvDtype::kF16);
  auto checkpoint = Model::Load(Checkpoint());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().message();
  EXPECT_EQ((*checkpoint)->AutoKvDtype(), KvDtype::kF32);
  std::vector<float> exact_logits, logits;
  const std::vector<int32_t> exact = GreedyFromBos(gguf, 60, KvDtype::kF32, &exact_logits);
  EXPECT_EQ(GreedyFromBos(gguf, 60, KvDtype::kF16, &logits), exact) << StoriesVocab().Decode(exact);
  EXPECT_NE(logits, exact_logits);  // the cache really held f16
}

TEST(Stories260K, GgufConversionDecodesTheSameTokens) {
  std::vector<int32_t> expected = GreedyFromBos(Checkpoint(), 60);
  std::string gguf = Convert(ModelFormat::kGguf, "stories260K.gguf");
  EXPECT_EQ(GreedyFromBos(gguf, 60), expected);
  // The GGUF carries the vocabulary: the text decodes without tokenizer.bin.
  auto loaded = LoadModel(gguf);
  ASSERT_TRUE(loaded.ok() && loaded->vocab.has_value());
  EXPECT_EQ(loaded->vocab->Decode(expected).substr(0, std::string(kDocumentedSample).size()), kDocumentedSample);
}

TEST(Stories260K, SafetensorsConversionDecodesTheSameTokens) {
  // The Hugging Face layout rotates halves: convert must re-pair the interleaved Q/K rows.
  std::vector<int32_t> expected = GreedyFromBos(Checkpoint(), 60);
  std::string folder = Convert(ModelFormat::kHfFolder, "stories260K-hf");
  EXPECT_TRUE(std::filesystem::exists(folder + "/config.json"));
  EXPECT_EQ(GreedyFromBos(folder, 60), expected);
}

}  // namespace
}  // namespace parallm
