// Synthetic models: preset shapes and seeded random weights.
#include "model/synthetic.h"

#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "model/arch/arch.h"
#include "model/family_config.h"
#include "model/model_writer.h"
#include "model/tensor_names.h"
#include "util/splitmix64.h"

namespace parallm {
namespace {

uint64_t HashName(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char ch : name) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  return h;
}

std::vector<float> Random(uint64_t seed, const std::string& name, int64_t n, float center, float half_width) {
  SplitMix64 rng{seed ^ HashName(name)};  // one stream per tensor, seeded from (seed, name)
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = center + half_width * rng.Uniform();
  return v;
}

}  // namespace

std::vector<std::string> PresetNames() {
  return {"tiny",      "qwen2.5-0.5b", "qwen3-0.6b", "llama-3.2-1b",  "llama-3.2-3b", "gemma-2b",
          "gemma2-2b", "gemma3-1b",    "phi-3-mini", "qwen3-30b-a3b", "qwen3-moe-mini",
          "nemotron-3-nano-30b-a3b", "nemotron-h-mini"};
}

namespace {

// What the family's published configs set beyond the shape: Gemma 2's soft-capping and window, Gemma 3's window
// and RoPE bases. (Gemma's query_pre_attn_scalar is head_dim for every size but 27B: 0 says so.)
void FamilyDefaults(ModelConfig& c) {
  if (c.arch == Arch::kNemotronH) {
    // A tiny hybrid: every kind of layer, Mamba after attention and after experts, 2 B/C groups, 2 of 4 expert groups.
    if (c.layer_pattern.empty()) {
      c.layer_pattern = "ME*M-E";
      c.n_layers = static_cast<int>(c.layer_pattern.size());
      c.ssm_heads = 8, c.ssm_head_dim = 32, c.ssm_state = 16, c.ssm_groups = 2, c.ssm_conv_kernel = 4;
      c.ssm_dt_min = 0.001f, c.ssm_chunk = 8;
      c.n_experts = 8, c.n_experts_used = 2, c.expert_ffn = c.ffn / 4, c.shared_expert_ffn = c.ffn / 2;
      c.moe_groups = 4, c.moe_topk_groups = 2, c.norm_topk_prob = true, c.routed_scaling = 2.5f;
    }
    c.activation = Activation::kRelu2;
  } else if (c.arch == Arch::kQwen2Moe || c.arch == Arch::kQwen3Moe || c.arch == Arch::kMixtral) {
    // A small mixture for tests when the preset gives none: enough experts that tokens pick different ones.
    if (c.n_experts == 0) {
      c.n_experts = c.arch == Arch::kMixtral ? 8 : 16;
      c.n_experts_used = c.arch == Arch::kMixtral ? 2 : 4;
      c.expert_ffn = c.arch == Arch::kMixtral ? c.ffn : c.ffn / 4;
      if (c.arch == Arch::kQwen2Moe) c.shared_expert_ffn = c.ffn / 2;
    }
  } else if (c.arch == Arch::kGemma2) {
    c.attn_softcap = 50, c.final_softcap = 30, c.sliding_window = 4096;
  } else if (c.arch == Arch::kGemma3) {
    c.sliding_window = 512, c.rope_local_theta = 10000, c.rope_theta = 1e6f;
  }
}

}  // namespace

Result<ModelConfig> PresetConfig(const std::string& preset, const Arch* arch) {
  ModelConfig c;
  Arch own;
  if (preset == "tiny") {
    own = arch ? *arch : Arch::kLlama;
    c.hidden = 256, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 64, c.ffn = 512, c.vocab = 512;
    c.context_length = 2048;
  } else if (preset == "qwen2.5-0.5b") {
    own = Arch::kQwen2;
    c.hidden = 896, c.n_layers = 24, c.n_heads = 14, c.n_kv_heads = 2, c.head_dim = 64, c.ffn = 4864;
    c.vocab = 151936, c.context_length = 32768, c.rope_theta = 1e6f, c.rms_eps = 1e-6f;
  } else if (preset == "qwen3-0.6b") {
    own = Arch::kQwen3;
    c.hidden = 1024, c.n_layers = 28, c.n_heads = 16, c.n_kv_heads = 8, c.head_dim = 128, c.ffn = 3072;
    c.vocab = 151936, c.context_length = 40960, c.rope_theta = 1e6f, c.rms_eps = 1e-6f;
  } else if (preset == "llama-3.2-1b") {
    own = Arch::kLlama;
    c.hidden = 2048, c.n_layers = 16, c.n_heads = 32, c.n_kv_heads = 8, c.head_dim = 64, c.ffn = 8192;
    c.vocab = 128256, c.context_length = 131072, c.rope_theta = 500000.0f, c.rms_eps = 1e-5f;
    c.rope_llama3 = ModelConfig::Llama3Rope{32, 1, 4, 8192};
  } else if (preset == "llama-3.2-3b") {  // meta-llama/Llama-3.2-3B-Instruct
    own = Arch::kLlama;
    c.hidden = 3072, c.n_layers = 28, c.n_heads = 24, c.n_kv_heads = 8, c.head_dim = 128, c.ffn = 8192;
    c.vocab = 128256, c.context_length = 131072, c.rope_theta = 500000.0f, c.rms_eps = 1e-5f;
    c.rope_llama3 = ModelConfig::Llama3Rope{32, 1, 4, 8192};
  } else if (preset == "gemma-2b") {  // google/gemma-1.1-2b-it
    own = Arch::kGemma;
    c.hidden = 2048, c.n_layers = 18, c.n_heads = 8, c.n_kv_heads = 1, c.head_dim = 256, c.ffn = 16384;
    c.vocab = 256000, c.context_length = 8192, c.rms_eps = 1e-6f;
  } else if (preset == "gemma2-2b") {  // google/gemma-2-2b-it
    own = Arch::kGemma2;
    c.hidden = 2304, c.n_layers = 26, c.n_heads = 8, c.n_kv_heads = 4, c.head_dim = 256, c.ffn = 9216;
    c.vocab = 256000, c.context_length = 8192, c.rms_eps = 1e-6f;
  } else if (preset == "gemma3-1b") {  // google/gemma-3-1b-it
    own = Arch::kGemma3;
    c.hidden = 1152, c.n_layers = 26, c.n_heads = 4, c.n_kv_heads = 1, c.head_dim = 256, c.ffn = 6912;
    c.vocab = 262144, c.context_length = 32768, c.rms_eps = 1e-6f;
  } else if (preset == "phi-3-mini") {  // microsoft/Phi-3-mini-4k-instruct
    own = Arch::kPhi3;
    c.hidden = 3072, c.n_layers = 32, c.n_heads = 32, c.n_kv_heads = 32, c.head_dim = 96, c.ffn = 8192;
    c.vocab = 32064, c.context_length = 4096, c.rms_eps = 1e-5f, c.sliding_window = 2047;
  } else if (preset == "qwen3-30b-a3b") {  // Qwen/Qwen3-30B-A3B
    own = Arch::kQwen3Moe;
    c.hidden = 2048, c.n_layers = 48, c.n_heads = 32, c.n_kv_heads = 4, c.head_dim = 128, c.ffn = 6144;
    c.vocab = 151936, c.context_length = 40960, c.rope_theta = 1e6f, c.rms_eps = 1e-6f;
    c.n_experts = 128, c.n_experts_used = 8, c.expert_ffn = 768;
  } else if (preset == "qwen3-moe-mini") {  // Qwen3-MoE scaled to benchmark on a small machine (~2B, ~0.5B active)
    // Qwen3-30B-A3B with hidden, layers, experts and expert width halved, and its 32 query / 4 KV heads halved to
    // 16 / 2 (the same GQA ratio, so attention weighs what it does in the model it stands for).
    own = Arch::kQwen3Moe;
    c.hidden = 1024, c.n_layers = 24, c.n_heads = 16, c.n_kv_heads = 2, c.head_dim = 128, c.ffn = 3072;
    c.vocab = 151936, c.context_length = 40960, c.rope_theta = 1e6f, c.rms_eps = 1e-6f;
    c.n_experts = 64, c.n_experts_used = 8, c.expert_ffn = 384;
  } else if (preset == "nemotron-3-nano-30b-a3b") {  // nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16
    own = Arch::kNemotronH;
    c.layer_pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME";
    c.n_layers = static_cast<int>(c.layer_pattern.size());
    c.hidden = 2688, c.n_heads = 32, c.n_kv_heads = 2, c.head_dim = 128, c.ffn = 1856;
    c.vocab = 131072, c.context_length = 262144, c.rms_eps = 1e-5f;
    c.ssm_heads = 64, c.ssm_head_dim = 64, c.ssm_state = 128, c.ssm_groups = 8, c.ssm_conv_kernel = 4;
    c.ssm_dt_min = 0.001f, c.ssm_chunk = 128;
    c.n_experts = 128, c.n_experts_used = 6, c.expert_ffn = 1856, c.shared_expert_ffn = 3712;
    c.moe_groups = 1, c.moe_topk_groups = 1, c.norm_topk_prob = true, c.routed_scaling = 2.5f;
  } else if (preset == "nemotron-h-mini") {  // Nemotron-3-Nano's layout scaled to benchmark on a small machine
    own = Arch::kNemotronH;
    c.layer_pattern = "MEMEM*EMEMEM*EME";
    c.n_layers = static_cast<int>(c.layer_pattern.size());
    c.hidden = 1024, c.n_heads = 16, c.n_kv_heads = 2, c.head_dim = 64, c.ffn = 1024;
    c.vocab = 32000, c.context_length = 32768, c.rms_eps = 1e-5f;
    c.ssm_heads = 32, c.ssm_head_dim = 32, c.ssm_state = 64, c.ssm_groups = 8, c.ssm_conv_kernel = 4;
    c.ssm_dt_min = 0.001f, c.ssm_chunk = 128;
    c.n_experts = 32, c.n_experts_used = 4, c.expert_ffn = 512, c.shared_expert_ffn = 1024;
    c.moe_groups = 1, c.moe_topk_groups = 1, c.norm_topk_prob = true, c.routed_scaling = 2.5f;
  } else {
    std::string names;
    for (const std::string& n : PresetNames()) names += (names.empty() ? "" : ", ") + n;
    return Err("unknown preset '{}' (presets: {})", preset, names);
  }
  if (arch != nullptr && *arch != own)
    return Err("preset '{}' is a {} model; --arch {} does not apply (only 'tiny' takes any --arch)", preset,
               ArchName(own), ArchName(*arch));
  const ArchSpec& spec = SpecFor(own);
  ApplySpec(spec, c);
  FamilyDefaults(c);
  c.tied_embeddings = preset == "llama-3.2-1b" || preset == "llama-3.2-3b" || preset == "qwen3-moe-mini" ? true : spec.default_tied_embeddings;
  c.rope_style = RopeStyle::kHalf;
  if (c.rope_llama3) {
    const auto& r = *c.rope_llama3;
    c.rope_freq_factors = Llama3RopeFactors(c.head_dim, c.rope_theta, r.factor, r.low_freq_factor,
                                            r.high_freq_factor, r.original_max_position);
  }
  return c;
}

ModelConfig::LongRope SyntheticLongRope(const ModelConfig& c, int original_max_position) {
  ModelConfig::LongRope r;
  for (int i = 0; i < c.rotary() / 2; ++i) {
    r.short_factors.push_back(1.0f + 0.1f * static_cast<float>(i));
    r.long_factors.push_back(1.0f + 2.0f * static_cast<float>(i));
  }
  r.original_max_position = original_max_position;
  r.attn_factor = LongRopeAttnFactor(c.context_length, original_max_position);
  return r;
}

namespace {

// A random hybrid (Nemotron-H) model. The Mamba parameters are drawn where the published models' initialisation puts
// them: A_log = log(1..16), dt_bias so that softplus(dt_bias) spans ~0.005..0.2 (some heads forget within a few tokens,
// some keep their state over the whole prompt), D near 1.
// The projection matrices (the embedding and experts included), uniform on [-half_width, half_width], go to `random`
// when it is given (make-model --fast: generated in their target type as the file is written), else through `sink`
// with GenerateRandomWeights' values; the Mamba vectors, norms and the conv filter always go through `sink`.
using RandomMatrixSink = std::function<Status(const std::string& name, std::vector<int64_t> shape, float half_width)>;

Status GenerateHybridWeights(const ModelConfig& c, uint64_t seed, const TensorSink& sink,
                             const RandomMatrixSink& random = nullptr) {
  const int64_t H = c.hidden, Q = c.q_dim(), KV = c.kv_dim(), F = c.ffn, V = c.vocab;
  const int64_t I = c.ssm_inner(), CD = c.ssm_conv_dim(), NH = c.ssm_heads, K = c.ssm_conv_kernel;
  auto uniform = [&](const std::string& name, std::vector<int64_t> shape, float a) {
    if (random) return random(name, std::move(shape), a);
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return sink(name, std::move(shape), Random(seed, name, n, 0.0f, a));
  };
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    return uniform(name, {rows, cols}, std::sqrt(3.0f / static_cast<float>(cols)));
  };
  auto vector = [&](const std::string& name, int64_t n, float center, float half_width) {
    return sink(name, {n}, Random(seed, name, n, center, half_width));
  };
  PARALLM_RETURN_IF_ERROR(uniform("token_embd.weight", {V, H}, 1.7f));
  for (int l = 0; l < c.n_layers; ++l) {
    PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_norm"), H, 1.0f, 0.2f));
    switch (c.KindOf(l)) {
      case LayerKind::kMamba: {
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ssm_in"), c.ssm_in_proj(), H));
        const std::string conv = LayerTensor(l, "ssm_conv1d");
        PARALLM_RETURN_IF_ERROR(sink(conv, {CD, K}, Random(seed, conv, CD * K, 0.0f, std::sqrt(3.0f / static_cast<float>(K)))));
        PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "ssm_conv1d", "bias"), CD, 0.0f, 0.2f));
        PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "ssm_dt", "bias"), NH, -3.0f, 1.5f));
        std::vector<float> a(static_cast<size_t>(NH));
        std::vector<float> u = Random(seed, fmt::format("blk.{}.ssm_a", l), NH, 0.0f, 1.0f);
        for (int64_t h = 0; h < NH; ++h) a[static_cast<size_t>(h)] = -(8.5f + 7.5f * u[static_cast<size_t>(h)]);
        PARALLM_RETURN_IF_ERROR(sink(fmt::format("blk.{}.ssm_a", l), {NH}, std::move(a)));
        PARALLM_RETURN_IF_ERROR(sink(fmt::format("blk.{}.ssm_d", l), {NH}, Random(seed, fmt::format("blk.{}.ssm_d", l), NH, 1.0f, 0.5f)));
        PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "ssm_norm"), I, 1.0f, 0.2f));
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ssm_out"), H, I));
        break;
      }
      case LayerKind::kAttention: {
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_q"), Q, H));
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_k"), KV, H));
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_v"), KV, H));
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_output"), H, Q));
        break;
      }
      case LayerKind::kMlp: {
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_up"), F, H));
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_down"), H, F));
        break;
      }
      case LayerKind::kMoe: {
        const int64_t E = c.n_experts, EF = c.expert_ffn, S = c.shared_expert_ffn;
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_gate_inp"), E, H));
        PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "exp_probs_b", "bias"), E, 0.0f, 0.1f));
        auto stacked = [&](const char* kind, int64_t rows, int64_t cols) {
          return uniform(LayerTensor(l, kind), {E, rows, cols}, std::sqrt(3.0f / static_cast<float>(cols)));
        };
        PARALLM_RETURN_IF_ERROR(stacked("ffn_up_exps", EF, H));
        PARALLM_RETURN_IF_ERROR(stacked("ffn_down_exps", H, EF));
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_up_shexp"), S, H));
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_down_shexp"), H, S));
        break;
      }
    }
  }
  PARALLM_RETURN_IF_ERROR(vector("output_norm.weight", H, 1.0f, 0.2f));
  if (!c.tied_embeddings) PARALLM_RETURN_IF_ERROR(matrix("output.weight", V, H));
  return Status::Ok();
}

}  // namespace

std::vector<float> RandomValues(uint64_t seed, const std::string& name, int64_t n, float center, float half_width) {
  return Random(seed, name, n, center, half_width);
}

Status GenerateRandomWeights(const ModelConfig& c, uint64_t seed, const TensorSink& sink) {
  if (c.hybrid()) return GenerateHybridWeights(c, seed, sink);
  PARALLM_RETURN_IF_ERROR(DescribeRandomWeights(
      c, [&](const std::string& name, std::vector<int64_t> shape, float center, float half_width) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return sink(name, std::move(shape), Random(seed, name, n, center, half_width));
      }));
  return EmitRopeTensors(c, sink);
}

Status DescribeRandomWeights(const ModelConfig& c, const RandomTensorSink& sink) {
  // Hybrid models draw their Mamba parameters by rules of their own (GenerateHybridWeights), not one spread per tensor.
  if (c.hybrid()) return Err("hybrid (Nemotron-H) weights are not described by one spread per tensor");
  const int64_t H = c.hidden, Q = c.q_dim(), KV = c.kv_dim(), F = c.ffn, V = c.vocab;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    // Uniform on [-a, a] has standard deviation a / sqrt(3).
    float a = std::sqrt(3.0f / static_cast<float>(cols));
    return sink(name, {rows, cols}, 0.0f, a);
  };
  auto vector = [&](const std::string& name, int64_t n, float center, float half_width) {
    return sink(name, {n}, center, half_width);
  };
  // Embedding rows of unit-ish scale, so the first RMSNorm sees O(1) inputs.
  PARALLM_RETURN_IF_ERROR(sink("token_embd.weight", {V, H}, 0.0f, 1.7f));
  const bool fused = SpecFor(c.arch).fused_projections;
  for (int l = 0; l < c.n_layers; ++l) {
    PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_norm"), H, 1.0f, 0.2f));
    if (fused) {
      PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_qkv"), Q + 2 * KV, H));
    } else {
      PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_q"), Q, H));
      PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_k"), KV, H));
      PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_v"), KV, H));
    }
    if (c.qkv_bias) {
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_q", "bias"), Q, 0.0f, 0.2f));
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_k", "bias"), KV, 0.0f, 0.2f));
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_v", "bias"), KV, 0.0f, 0.2f));
    }
    if (c.qk_norm) {
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_q_norm"), c.head_dim, 1.0f, 0.2f));
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_k_norm"), c.head_dim, 1.0f, 0.2f));
    }
    PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_output"), H, Q));
    if (c.post_norms) {
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "post_attention_norm"), H, 1.0f, 0.2f));
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "post_ffw_norm"), H, 1.0f, 0.2f));
    }
    PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "ffn_norm"), H, 1.0f, 0.2f));
    if (c.LayerIsMoe(l)) {
      // Router rows of the same scale as the other matrices: logits of ~unit spread, so tokens route differently.
      const int64_t E = c.n_experts, EF = c.expert_ffn, S = c.shared_expert_ffn;
      PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_gate_inp"), E, H));
      auto stacked = [&](const char* kind, int64_t rows, int64_t cols) {
        const std::string name = LayerTensor(l, kind);
        float a = std::sqrt(3.0f / static_cast<float>(cols));
        return sink(name, {E, rows, cols}, 0.0f, a);
      };
      PARALLM_RETURN_IF_ERROR(stacked("ffn_gate_exps", EF, H));
      PARALLM_RETURN_IF_ERROR(stacked("ffn_up_exps", EF, H));
      PARALLM_RETURN_IF_ERROR(stacked("ffn_down_exps", H, EF));
      if (S > 0) {
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_gate_shexp"), S, H));
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_up_shexp"), S, H));
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_down_shexp"), H, S));
        PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "ffn_gate_inp_shexp"), H, 0.0f, std::sqrt(3.0f / static_cast<float>(H))));
      }
      continue;
    }
    if (fused) {
      PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_up"), 2 * F, H));  // [gate; up]
    } else {
      PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_gate"), F, H));
      PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_up"), F, H));
    }
    PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_down"), H, F));
  }
  PARALLM_RETURN_IF_ERROR(vector("output_norm.weight", H, 1.0f, 0.2f));
  if (!c.tied_embeddings) PARALLM_RETURN_IF_ERROR(matrix("output.weight", V, H));
  return Status::Ok();
}


Status WriteFastRandomModel(const ModelConfig& c, const WriteOptions& options, const Vocab& vocab, uint64_t seed,
                            const std::string& path) {
  ModelWriter writer(c, RopeStyle::kHalf, options, vocab);
  if (c.hybrid()) {
    PARALLM_RETURN_IF_ERROR(GenerateHybridWeights(
        c, seed,
        [&](const std::string& name, std::vector<int64_t> shape, std::vector<float> values) {
          return writer.Add(name, std::move(shape), std::move(values));
        },
        [&](const std::string& name, std::vector<int64_t> shape, float half_width) {
          return writer.AddRandom(name, std::move(shape), half_width, seed);
        }));
    return writer.Finish(path);
  }
  PARALLM_RETURN_IF_ERROR(DescribeRandomWeights(
      c, [&](const std::string& name, std::vector<int64_t> shape, float center, float half_width) -> Status {
        if (shape.size() >= 2 && center == 0.0f) return writer.AddRandom(name, std::move(shape), half_width, seed);
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return writer.Add(name, shape, Random(seed, name, n, center, half_width));
      }));
  PARALLM_RETURN_IF_ERROR(EmitRopeTensors(c, [&](const std::string& name, std::vector<int64_t> shape,
                                                 std::vector<float> values) {
    return writer.Add(name, std::move(shape), std::move(values));
  }));
  return writer.Finish(path);
}

}  // namespace parallm
