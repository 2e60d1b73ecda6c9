// Nemotron-H pieces below the forward pass (whose logits tests/reference checks): the sigmoid, group-limited expert
// routing on hand-made logits, the published 30B-A3B shape (parameters, cache bytes), the tensor names both ways,
// config.json errors that must name the field, GGUF metadata and shapes as llama.cpp writes nemotron_h(_moe), and
// the mixer's rule for which positions run the chunked (SSD) scan, with what it means for a prompt split in steps.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "formats/gguf.h"
#include "model/config.h"
#include "engine/single_sequence.h"
#include "model/loader.h"
#include "model/mamba_mixer.h"
#include "model/nemotron_routing.h"
#include "model/synthetic.h"
#include "model/tensor_names.h"
#include "test_models.h"

namespace parallm {
namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

TEST(NemotronRouting, GroupLimitedTopKWithCorrectionBias) {
  // 1 token, 8 experts in 4 groups of 2, keep the best 2 groups, top-2. Choice = sigmoid(logit) + bias.
  const std::vector<float> logits = {3.0f, -3.0f, 0.5f, 0.4f, 2.0f, -2.0f, 1.0f, 0.9f};
  const std::vector<float> bias = {0, 0, 0, 0, 0, 0, 0, 0.3f};
  // Group sums of their two choices: g0 0.95+0.05=1.00, g1 0.62+0.60=1.22, g2 0.88+0.12=1.00, g3 0.73+0.71+0.3=1.74.
  // Kept: g3, g1. Best two experts there by choice: 7 (1.01), 6 (0.73). Expert 0 (the best score) is not kept.
  SigmoidRouting p{8, 2, 4, 2, /*renormalize=*/true, /*scaling=*/2.5f};
  ExpertRouting r;
  RouteTokensSigmoid(logits.data(), bias.data(), 1, p, &r);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{7, 6}));
  // Weights: the unbiased scores, renormalised, times the scaling.
  const float s7 = Sigmoid(0.9f), s6 = Sigmoid(1.0f);
  EXPECT_NEAR(r.weight[0], 2.5f * s7 / (s7 + s6), 1e-6);
  EXPECT_NEAR(r.weight[1], 2.5f * s6 / (s7 + s6), 1e-6);
  // One group: plain top-k by choice; not renormalised: the scores themselves.
  SigmoidRouting flat{8, 2, 1, 1, false, 1.0f};
  RouteTokensSigmoid(logits.data(), nullptr, 1, flat, &r);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{0, 4}));
  EXPECT_NEAR(r.weight[0], Sigmoid(3.0f), 1e-6);
  EXPECT_EQ(r.offsets, (std::vector<int32_t>{0, 1, 1, 1, 1, 2, 2, 2, 2}));
}

// SsdChunks: whole chunks (8 tokens) inside both the slice and the prompt run chunked. A prompt run in steps that
// start and end on chunk boundaries gives the logits it gives whole, bit for bit; a step ending inside a chunk (which
// the engine's scheduler never makes for a hybrid model) runs that chunk token by token: nearly the same, not the same.
TEST(NemotronH, SsdChunksAndPromptSplitsOnTheirBoundaries) {
  auto runs = [](int32_t first, int32_t n, int32_t prompt) {
    SequenceSlice s;
    s.num_tokens = n;
    s.context_len = first + n;
    s.num_prompt_tokens = prompt;
    const SsdRuns r = SsdChunks(s, 8);
    return std::pair{r.chunked_begin, r.chunked_end};
  };
  EXPECT_EQ(runs(0, 29, 29), (std::pair{0, 24}));   // the tail [24, 29) token by token
  EXPECT_EQ(runs(8, 16, 29), (std::pair{8, 24}));
  EXPECT_EQ(runs(24, 5, 29), (std::pair{24, 24}));  // the tail alone: none
  EXPECT_EQ(runs(33, 1, 29), (std::pair{34, 34}));  // a decode token: none
  EXPECT_EQ(runs(0, 40, 20), (std::pair{0, 16}));   // a recomputed request: its decoded tokens token by token
  EXPECT_EQ(runs(3, 20, 0), (std::pair{8, 16}));    // prompt length unknown: the slice's whole chunks

  testing::TinyModelOptions o{Arch::kNemotronH, ModelFormat::kHfFolder, DType::kF32};
  auto model = testing::TinyModel(o, "ssd-splits");
  ASSERT_EQ(SsdChunk(model->config()), 8);
  ModelConfig published;
  published.ssm_chunk = 128;
  EXPECT_EQ(SsdChunk(published), 32);  // capped: the cost per token grows with the chunk
  std::vector<int32_t> prompt(29);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((37 * i + 11) % 500);
  auto logits_in_steps = [&](std::vector<size_t> ends) {
    SingleSequence seq(*model, 64, nullptr);
    std::vector<float> all;
    for (size_t at = 0, k = 0; k < ends.size(); at = ends[k++]) {
      std::vector<float> part = seq.Append(std::span<const int32_t>(prompt).subspan(at, ends[k] - at), true);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  };
  const std::vector<float> whole = logits_in_steps({29});
  EXPECT_EQ(logits_in_steps({8, 24, 29}), whole);
  EXPECT_EQ(logits_in_steps({16, 27, 29}), whole);
  const std::vector<float> inside = logits_in_steps({5, 29});  // [0, 8) token by token
  ASSERT_EQ(inside.size(), whole.size());
  EXPECT_NE(inside, whole);
  for (size_t i = 0; i < whole.size(); ++i) ASSERT_NEAR(inside[i], whole[i], 1e-3f * (1 + std::abs(whole[i]))) << i;
}

TEST(NemotronH, PublishedNanoShape) {
  auto c = PresetConfig("nemotron-3-nano-30b-a3b", nullptr);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->n_layers, 52);
  // 31.6B weights, 3.6B read per token (6 of 128 experts plus the shared one); NVIDIA's card says 31.6B / ~3.5B.
  EXPECT_NEAR(static_cast<double>(ParameterCount(*c)), 31.58e9, 0.01e9);
  EXPECT_NEAR(static_cast<double>(ActiveParameterCount(*c)), 3.58e9, 0.01e9);
  // 6 attention layers x 2 KV heads x 128 x K and V in f32; 23 Mamba layers' conv windows and 64 x 64 x 128 states.
  EXPECT_EQ(KvBytesPerToken(*c), 6 * 2 * 128 * 2 * 4);
  EXPECT_EQ(StateBytesPerSequence(*c), 23 * 4 * (3 * (4096 + 2 * 8 * 128) + 4096 * 128));
}

TEST(NemotronH, TensorNamesBothWays) {
  for (const char* canonical :
       {"token_embd.weight", "output_norm.weight", "output.weight", "blk.0.attn_norm.weight", "blk.3.ssm_in.weight",
        "blk.3.ssm_conv1d.weight", "blk.3.ssm_conv1d.bias", "blk.3.ssm_dt.bias", "blk.3.ssm_a", "blk.3.ssm_d",
        "blk.3.ssm_norm.weight", "blk.3.ssm_out.weight", "blk.2.attn_q.weight", "blk.5.ffn_up.weight",
        "blk.1.ffn_gate_inp.weight", "blk.1.exp_probs_b.bias", "blk.1.ffn_up.17.weight", "blk.1.ffn_down_exps.weight",
        "blk.1.ffn_up_shexp.weight", "blk.1.ffn_up_exps.scales"}) {
    auto hf = HfNameFor(canonical, Arch::kNemotronH);
    ASSERT_TRUE(hf.has_value()) << canonical;
    EXPECT_EQ(CanonicalNameForHf(*hf, Arch::kNemotronH).value_or(""), canonical) << *hf;
  }
  EXPECT_EQ(HfNameFor("blk.3.ssm_a", Arch::kNemotronH).value_or(""), "backbone.layers.3.mixer.A_log");
  EXPECT_EQ(HfNameFor("blk.1.ffn_up.17.weight", Arch::kNemotronH).value_or(""),
            "backbone.layers.1.mixer.experts.17.up_proj.weight");
  EXPECT_EQ(CanonicalNameForHf("model.layers.0.norm.weight", Arch::kNemotronH).value_or(""), "blk.0.attn_norm.weight");
}

// A config.json field parallm cannot honour stops the load with its name.
TEST(NemotronH, ConfigErrorsNameTheField) {
  testing::TinyModelOptions o{Arch::kNemotronH, ModelFormat::kHfFolder, DType::kF32};
  const std::string dir = testing::WriteTinyModel(o, "nemotron-errors");
  std::ifstream in(dir + "/config.json");
  const std::string original((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(LoadModel(dir).ok());
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = original;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    std::ofstream(dir + "/config.json") << text;
    auto m = LoadModel(dir);
    return m.ok() ? std::string("loaded") : m.status().message();
  };
  EXPECT_NE(with("\"relu2\"", "\"silu\"").find("mlp_hidden_act"), std::string::npos);
  EXPECT_NE(with("\"moe_latent_size\":null", "\"moe_latent_size\":512").find("moe_latent_size"), std::string::npos);
  EXPECT_NE(with("\"ME*M-E\"", "\"ME*M-X\"").find("hybrid_override_pattern"), std::string::npos);
  EXPECT_NE(with("\"ME*M-E\"", "\"ME*M-\"").find("hybrid_override_pattern"), std::string::npos);
  EXPECT_NE(with("\"n_groups\":2", "\"n_groups\":3").find("groups"), std::string::npos);
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

std::vector<int64_t> IntArray(const GgufFile& f, const std::string& key) {
  std::vector<int64_t> out;
  const GgufValue* v = f.Find(key);
  if (v == nullptr || v->type != GgufType::kArray) return out;
  for (const GgufValue& e : v->array) out.push_back(e.AsInt().value_or(-1));
  return out;
}

// convert_hf_to_gguf.py's NemotronHModel: per-layer arrays say which layer is what (0 KV heads and 0 FFN: Mamba-2),
// ssm.time_step_rank holds the Mamba heads, A is stored as A itself [heads, 1], the norm as [groups, inner / groups];
// the conv filter, A, D and the norm stay f32 in a quantized file. The loader reads the pattern back from the arrays.
TEST(NemotronH, GgufAsLlamaCppWritesIt) {
  testing::TinyModelOptions o{Arch::kNemotronH, ModelFormat::kGguf, DType::kQ8_0};
  o.pattern = "ME*MEM";
  const std::string path = testing::WriteTinyModel(o, "nemotron-gguf");
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->GetString("general.architecture").value_or(""), "nemotron_h_moe");
  const std::string p = "nemotron_h_moe.";
  EXPECT_EQ(IntArray(*file, p + "feed_forward_length"), (std::vector<int64_t>{0, 128, 0, 0, 128, 0}));
  EXPECT_EQ(IntArray(*file, p + "attention.head_count_kv"), (std::vector<int64_t>{0, 0, 2, 0, 0, 0}));
  EXPECT_EQ(file->GetInt(p + "ssm.time_step_rank").value_or(0), 8);
  EXPECT_EQ(file->GetInt(p + "ssm.inner_size").value_or(0), 8 * 32);
  EXPECT_EQ(file->GetInt(p + "ssm.group_count").value_or(0), 2);
  EXPECT_EQ(file->GetInt(p + "expert_shared_count").value_or(0), 1);
  EXPECT_EQ(file->GetInt(p + "expert_group_used_count").value_or(0), 2);
  const TensorSet& t = file->tensors();
  EXPECT_EQ(t.Find("blk.0.ssm_a")->shape, (std::vector<int64_t>{8, 1}));
  EXPECT_EQ(t.Find("blk.0.ssm_norm.weight")->shape, (std::vector<int64_t>{2, 128}));
  EXPECT_EQ(t.Find("blk.0.ssm_conv1d.weight")->shape, (std::vector<int64_t>{256 + 2 * 2 * 16, 4}));
  for (const char* name : {"blk.0.ssm_a", "blk.0.ssm_d", "blk.0.ssm_norm.weight", "blk.0.ssm_conv1d.weight"})
    EXPECT_EQ(t.Find(name)->dtype, DType::kF32) << name;
  EXPECT_EQ(t.Find("blk.0.ssm_in.weight")->dtype, DType::kQ8_0);
  EXPECT_LT(*reinterpret_cast<const float*>(t.Find("blk.0.ssm_a")->data), 0.0f);  // A, not A_log
  auto m = LoadModel(path);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->config.layer_pattern, "ME*MEM");
  EXPECT_EQ(m->config.n_kv_heads, 2);
  EXPECT_EQ(m->config.expert_ffn, 128);
  EXPECT_EQ(m->config.moe_topk_groups, 2);
  EXPECT_EQ(m->config.ssm_dt_min, 0.0f);  // llama.cpp does not clamp dt

  // The same file with a scalar feed_forward_length (no per-layer kinds) is refused with the key's name.
  GgufWriter w;
  for (const auto& [key, value] : file->metadata())
    w.Set(key, key == p + "feed_forward_length" ? GgufValue::U32(128) : value);
  for (const GgufTensorInfo& info : file->tensor_infos()) {
    const TensorView* v = t.Find(info.name);
    ASSERT_TRUE(w.AddTensor(info.name, v->dtype, v->shape, v->data, v->nbytes).ok());
  }
  const std::string scalar = path + ".scalar.gguf";
  ASSERT_TRUE(w.Write(scalar).ok());
  auto bad = LoadModel(scalar);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("feed_forward_length"), std::string::npos) << bad.status().message();

  // A multi-token-prediction head appended as an extra block (nextn_predict_layers 1): the trunk loads without it.
  GgufWriter mtp;
  for (const auto& [key, value] : file->metadata()) {
    GgufValue v = value;
    if (key == p + "block_count") v = GgufValue::U32(7);
    if (key == p + "feed_forward_length") v.array.push_back(GgufValue::I32(128));
    if (key == p + "attention.head_count_kv") v.array.push_back(GgufValue::I32(2));
    mtp.Set(key, v);
  }
  mtp.Set(p + "nextn_predict_layers", GgufValue::U32(1));
  for (const GgufTensorInfo& info : file->tensor_infos()) {
    const TensorView* v = t.Find(info.name);
    ASSERT_TRUE(mtp.AddTensor(info.name, v->dtype, v->shape, v->data, v->nbytes).ok());
  }
  const std::string with_mtp = path + ".mtp.gguf";
  ASSERT_TRUE(mtp.Write(with_mtp).ok());
  auto trunk = LoadModel(with_mtp);
  ASSERT_TRUE(trunk.ok()) << trunk.status().message();
  EXPECT_EQ(trunk->config.layer_pattern, "ME*MEM");

  // MLP and expert layers together cannot be told apart in llama.cpp's arrays: the writer refuses the pattern.
  auto c = PresetConfig("tiny", &o.arch);
  ASSERT_TRUE(c.ok());
  ModelWriter mixed(*c, RopeStyle::kHalf, WriteOptions{}, Vocab::ByteLevel(c->vocab));
  Status st = mixed.Add("token_embd.weight", {c->vocab, c->hidden}, std::vector<float>(static_cast<size_t>(c->vocab * c->hidden)));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("ME*M-E"), std::string::npos) << st.message();
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

}  // namespace
}  // namespace parallm
