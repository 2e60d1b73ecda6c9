// Model loading: real files load and run; wrong or damaged ones give errors that name the file and problem.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>

#include "engine/single_sequence.h"
#include "formats/gguf.h"
#include "model/model.h"
#include "test_models.h"
#include "test_paths.h"

namespace parallm {
namespace {

void ExpectError(const Result<LoadedModel>& r, const std::string& fragment) {
  ASSERT_FALSE(r.ok()) << "expected an error containing '" << fragment << "'";
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
}

TEST(Loader, Llama2TinyRandomGgufLoadsAndRuns) {
  // A GGUF written by another tool (F16 matrices, F32 norms, the real 32,000-token Llama-2 vocabulary).
  auto model = Model::Load(testing::FixturePath("models/llama-2-tiny-random/llama-2-tiny-random.gguf"));
  ASSERT_TRUE(model.ok()) << model.status().message();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.hidden, 8);
  EXPECT_EQ(c.n_layers, 1);
  EXPECT_EQ(c.n_heads, 2);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(c.ffn, 32);
  EXPECT_EQ(c.vocab, 32000);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.rope_style, RopeStyle::kInterleaved);
  ASSERT_TRUE((*model)->loaded().vocab.has_value());
  EXPECT_EQ((*model)->loaded().vocab->bos, 1);
  SingleSequence seq(**model, 8, nullptr);
  std::vector<int32_t> prompt = {1, 15043, 3186};  // <s> Hello world
  std::vector<float> logits = seq.Append(prompt, /*all_logits=*/true);
  ASSERT_EQ(logits.size(), 3u * 32000u);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ((*model)->loaded().vocab->Decode(std::vector<int32_t>{1, 15043, 3186}), "Hello world");
}

TEST(Loader, RejectsMissingPaths) {
  ExpectError(LoadModel("/nonexistent/model.gguf"), "no such file");
  std::string dir = testing::ScratchDir("loader-empty");
  ExpectError(LoadModel(dir), "without config.json");
}

TEST(Loader, RejectsVocabularyOnlyGguf) {
  ExpectError(LoadModel(testing::FixturePath("tokenizers/gguf-vocab/ggml-vocab-llama-spm.gguf")), "no tensors");
}

TEST(Loader, RejectsUnsupportedModelType) {
  std::string dir = testing::ScratchDir("loader-bert");
  std::ofstream(dir + "/config.json") << R"({"model_type": "bert", "hidden_size": 8})";
  std::ofstream(dir + "/model.safetensors", std::ios::binary) << std::string("\x02\0\0\0\0\0\0\0{}", 10);
  ExpectError(LoadModel(dir), "model_type 'bert' is not supported");
}

// Writes a tiny model of `arch` as a Hugging Face folder, lets `edit` change its config.json text, and loads it.
Result<LoadedModel> LoadEditedHf(Arch arch, const std::string& name,
                                 const std::function<void(std::string&)>& edit) {
  testing::TinyModelOptions options;
  options.arch = arch;
  options.format = ModelFormat::kHfFolder;
  if (arch == Arch::kGemma3) options.layers = 6;  // five windowed layers and a global one
  const std::string dir = testing::WriteTinyModel(options, name);
  std::ifstream in(dir + "/config.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  edit(text);
  std::ofstream(dir + "/config.json", std::ios::trunc) << text;
  return LoadModel(dir);
}

void Replace(std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << text;
  text.replace(at, from.size(), to);
}

// A field parallm cannot honour is an error naming it, never a silently different model.
TEST(Loader, RejectsFamilyFieldsItCannotHonour) {
  ExpectError(LoadEditedHf(Arch::kGemma2, "gemma2-relu",
                           [](std::string& t) { Replace(t, "\"gelu_pytorch_tanh\"", "\"relu\""); }),
              "'hidden_activation' = 'relu' is not supported");
  ExpectError(LoadEditedHf(Arch::kLlama, "llama-gelu",
                           [](std::string& t) { Replace(t, "\"silu\"", "\"gelu\""); }),
              "'hidden_act' = 'gelu' is not supported");
  ExpectError(LoadEditedHf(Arch::kPhi3, "phi3-yarn",
                           [](std::string& t) {
                             Replace(t, "\"model_type\"", "\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4},\"model_type\"");
                           }),
              "rope_scaling type 'yarn' is not supported for phi3");
  ExpectError(LoadEditedHf(Arch::kGemma3, "gemma3-layers",
                           [](std::string& t) { Replace(t, "\"full_attention\"", "\"sliding_attention\""); }),
              "'layer_types' does not follow sliding_window_pattern 6");
  // Mixture of experts: the routing fields are checked against each other, and a required one must be there.
  ExpectError(LoadEditedHf(Arch::kQwen3Moe, "qwen3moe-topk",
                           [](std::string& t) { Replace(t, "\"num_experts_per_tok\":4", "\"num_experts_per_tok\":17"); }),
              "17 experts per token out of 16");
  ExpectError(LoadEditedHf(Arch::kQwen2Moe, "qwen2moe-shared",
                           [](std::string& t) { Replace(t, "\"shared_expert_intermediate_size\"", "\"x\""); }),
              "'shared_expert_intermediate_size' must be a positive integer for qwen2moe");
  // A layer listed in mlp_only_layers is dense: the file's experts for it are not what the binder looks for.
  ExpectError(LoadEditedHf(Arch::kQwen3Moe, "qwen3moe-dense0",
                           [](std::string& t) { Replace(t, "\"mlp_only_layers\":[]", "\"mlp_only_layers\":[0]"); }),
              "missing tensor 'model.layers.0.mlp.gate_proj.weight'");
  // And the unedited files load.
  EXPECT_TRUE(LoadEditedHf(Arch::kGemma2, "gemma2-ok", [](std::string&) {}).ok());
}

TEST(Loader, RejectsUnknownFiles) {
  std::string dir = testing::ScratchDir("loader-text");
  std::ofstream(dir + "/notes.txt") << "hello";
  ExpectError(LoadModel(dir + "/notes.txt"), "not a recognized model");
  std::ofstream(dir + "/short.bin") << "abc";
  ExpectError(LoadModel(dir + "/short.bin"), "too short");
}

// A GGUF with llama metadata whose tensors are wrong in one way each.
std::string WriteBrokenGguf(const std::string& name, bool drop_q, bool wrong_shape) {
  GgufWriter w;
  w.Set("general.architecture", GgufValue::String("llama"));
  w.Set("llama.embedding_length", GgufValue::U32(32));
  w.Set("llama.block_count", GgufValue::U32(1));
  w.Set("llama.feed_forward_length", GgufValue::U32(64));
  w.Set("llama.attention.head_count", GgufValue::U32(2));
  std::vector<float> zeros(64 * 64, 0.0f);
  auto add = [&](const std::string& n, std::vector<int64_t> shape) {
    size_t count = 1;
    for (int64_t d : shape) count *= static_cast<size_t>(d);
    ASSERT_TRUE(w.AddTensor(n, DType::kF32, shape, zeros.data(), count * 4).ok());
  };
  add("token_embd.weight", {64, 32});
  add("blk.0.attn_norm.weight", {32});
  if (!drop_q) add("blk.0.attn_q.weight", {32, wrong_shape ? 16 : 32});
  add("blk.0.attn_k.weight", {32, 32});
  add("blk.0.attn_v.weight", {32, 32});
  add("blk.0.attn_output.weight", {32, 32});
  add("blk.0.ffn_norm.weight", {32});
  add("blk.0.ffn_gate.weight", {64, 32});
  add("blk.0.ffn_up.weight", {64, 32});
  add("blk.0.ffn_down.weight", {32, 64});
  add("output_norm.weight", {32});
  std::string path = testing::ScratchDir("loader-broken") + "/" + name;
  EXPECT_TRUE(w.Write(path).ok());
  return path;
}

TEST(Loader, GgufWithAllTensorsLoads) {
  auto r = LoadModel(WriteBrokenGguf("ok.gguf", false, false));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->config.tied_embeddings);
}

TEST(Loader, RejectsMissingTensor) {
  ExpectError(LoadModel(WriteBrokenGguf("missing.gguf", true, false)), "missing tensor 'blk.0.attn_q.weight'");
}

TEST(Loader, RejectsWrongShape) {
  ExpectError(LoadModel(WriteBrokenGguf("shape.gguf", false, true)), "has shape [32, 16], expected [32, 32]");
}

}  // namespace
}  // namespace parallm
