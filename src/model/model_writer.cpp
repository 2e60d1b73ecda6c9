// ModelWriter: f32 tensors in, GGUF / safetensors / MLX folders out, with metadata other engines read.
#include "model/model_writer.h"

#include <cmath>

#include <filesystem>

#include "formats/hf_folder.h"
#include "model/arch/arch.h"
#include "model/family_config.h"
#include "model/tensor_names.h"
#include "tensor/quant.h"
#include "tensor/random_rows.h"
#include "util/check.h"
#include "util/strings.h"

namespace parallm {
namespace {

bool IsRopeProjection(const std::string& name) {
  return name.find(".attn_q.") != std::string::npos || name.find(".attn_k.") != std::string::npos;
}

std::shared_ptr<std::vector<uint8_t>> Quantize(DType type, const std::vector<float>& values, int64_t rows,
                                               int64_t cols) {
  auto out = std::make_shared<std::vector<uint8_t>>(RowBytes(type, cols) * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    QuantizeRow(type, values.data() + r * cols, out->data() + static_cast<size_t>(r) * RowBytes(type, cols), cols);
  return out;
}

}  // namespace

std::vector<float> PermuteRopeRows(const std::vector<float>& values, int64_t rows, int64_t cols, int n_heads,
                                   RopeStyle from, RopeStyle to) {
  if (from == to) return values;
  PARALLM_CHECK(rows % n_heads == 0 && (rows / n_heads) % 2 == 0);
  const int64_t hd = rows / n_heads, half = hd / 2;
  std::vector<float> out(values.size());
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        int64_t interleaved = h * hd + 2 * i + j, halves = h * hd + j * half + i;
        int64_t dst = to == RopeStyle::kInterleaved ? interleaved : halves;
        int64_t src = to == RopeStyle::kInterleaved ? halves : interleaved;
        std::copy_n(values.data() + src * cols, cols, out.data() + dst * cols);
      }
  return out;
}

Status EmitRopeTensors(const ModelConfig& c, const TensorSink& sink) {
  auto vector = [&](const std::string& name, const std::vector<float>& v) {
    return sink(name, {static_cast<int64_t>(v.size())}, v);
  };
  if (!c.rope_freq_factors.empty()) PARALLM_RETURN_IF_ERROR(vector("rope_freqs.weight", c.rope_freq_factors));
  if (c.rope_longrope) {
    PARALLM_RETURN_IF_ERROR(vector("rope_factors_long.weight", c.rope_longrope->long_factors));
    PARALLM_RETURN_IF_ERROR(vector("rope_factors_short.weight", c.rope_longrope->short_factors));
  }
  return Status::Ok();
}

namespace {

// Appends m's rows, dequantized to f32, to `out`.
void AppendRowsF32(const MatrixView& m, std::vector<float>& out) {
  const size_t at = out.size();
  out.resize(at + static_cast<size_t>(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r) DequantizeMatrixRow(m, r, out.data() + at + r * m.cols);
}

Status EmitMatrix(const TensorSink& sink, const std::string& name, const MatrixView& m) {
  std::vector<float> v;
  AppendRowsF32(m, v);
  return sink(name, {m.rows, m.cols}, std::move(v));
}

// Experts stacked into one 3-D tensor [experts, rows, cols], GGUF's layout.
Status EmitStacked(const TensorSink& sink, const std::string& name, const std::vector<MatrixView>& experts) {
  std::vector<float> v;
  for (const MatrixView& m : experts) AppendRowsF32(m, v);
  return sink(name, {static_cast<int64_t>(experts.size()), experts[0].rows, experts[0].cols}, std::move(v));
}

// A sparse layer's tensors in GGUF's layout: the router, each projection's experts stacked into one 3-D tensor, the
// shared expert and its gate vector.
Status EmitMoe(int l, const MoeWeights& moe, const TensorSink& sink) {
  auto matrix = [&](const std::string& name, const MatrixView& m) { return EmitMatrix(sink, name, m); };
  auto stacked = [&](const char* kind, const std::vector<MatrixView>& experts) {
    return EmitStacked(sink, LayerTensor(l, kind), experts);
  };
  PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_gate_inp"), moe.router));
  PARALLM_RETURN_IF_ERROR(stacked("ffn_gate_exps", moe.gate));
  PARALLM_RETURN_IF_ERROR(stacked("ffn_up_exps", moe.up));
  PARALLM_RETURN_IF_ERROR(stacked("ffn_down_exps", moe.down));
  if (moe.shared_gate.rows > 0) {
    PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_gate_shexp"), moe.shared_gate));
    PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_up_shexp"), moe.shared_up));
    PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_down_shexp"), moe.shared_down));
    const std::vector<float>& g = moe.shared_expert_gate;
    PARALLM_RETURN_IF_ERROR(sink(LayerTensor(l, "ffn_gate_inp_shexp"), {static_cast<int64_t>(g.size())}, g));
  }
  return Status::Ok();
}

// A hybrid (Nemotron-H) model's tensors by GenerateRandomWeights' names and shapes: each layer's norm and its one
// mixer (A as A itself; the writer turns it into A_log for folders), ungated experts stacked.
Status EmitHybridWeights(const ModelConfig& c, const ModelWeights& w, const TensorSink& sink) {
  auto matrix = [&](const std::string& name, const MatrixView& m) { return EmitMatrix(sink, name, m); };
  auto vector = [&](const std::string& name, const std::vector<float>& v) {
    return sink(name, {static_cast<int64_t>(v.size())}, v);
  };
  PARALLM_RETURN_IF_ERROR(matrix("token_embd.weight", w.token_embd));
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_norm"), lw.attn_norm));
    switch (c.KindOf(l)) {
      case LayerKind::kMamba: {
        const MambaWeights& m = lw.mamba;
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ssm_in"), m.in_proj));
        PARALLM_RETURN_IF_ERROR(sink(LayerTensor(l, "ssm_conv1d"), {c.ssm_conv_dim(), c.ssm_conv_kernel}, m.conv));
        if (!m.conv_bias.empty()) PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "ssm_conv1d", "bias"), m.conv_bias));
        PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "ssm_dt", "bias"), m.dt_bias));
        PARALLM_RETURN_IF_ERROR(vector(fmt::format("blk.{}.ssm_a", l), m.a));
        PARALLM_RETURN_IF_ERROR(vector(fmt::format("blk.{}.ssm_d", l), m.d));
        PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "ssm_norm"), m.norm));
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ssm_out"), m.out_proj));
        break;
      }
      case LayerKind::kAttention:
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_q"), lw.wq));
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_k"), lw.wk));
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_v"), lw.wv));
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_output"), lw.wo));
        break;
      case LayerKind::kMlp:
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_up"), lw.w_up));
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_down"), lw.w_down));
        break;
      case LayerKind::kMoe: {
        const MoeWeights& moe = lw.moe;
        auto stacked = [&](const char* kind, const std::vector<MatrixView>& experts) {
          return EmitStacked(sink, LayerTensor(l, kind), experts);
        };
        PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_gate_inp"), moe.router));
        PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "exp_probs_b", "bias"), moe.score_bias));
        PARALLM_RETURN_IF_ERROR(stacked("ffn_up_exps", moe.up));
        PARALLM_RETURN_IF_ERROR(stacked("ffn_down_exps", moe.down));
        if (moe.shared_up.rows > 0) {
          PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_up_shexp"), moe.shared_up));
          PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_down_shexp"), moe.shared_down));
        }
        break;
      }
    }
  }
  PARALLM_RETURN_IF_ERROR(vector("output_norm.weight", w.output_norm));
  if (!c.tied_embeddings) PARALLM_RETURN_IF_ERROR(matrix("output.weight", w.output));
  return Status::Ok();
}

}  // namespace

Status EmitWeights(const ModelConfig& c, const ModelWeights& w, const TensorSink& sink) {
  if (c.hybrid()) return EmitHybridWeights(c, w, sink);
  auto matrix = [&](const std::string& name, const MatrixView& m) { return EmitMatrix(sink, name, m); };
  auto vector = [&](const std::string& name, const std::vector<float>& v) {
    return sink(name, {static_cast<int64_t>(v.size())}, v);
  };
  const bool fused = SpecFor(c.arch).fused_projections;
  PARALLM_RETURN_IF_ERROR(matrix("token_embd.weight", w.token_embd));
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_norm"), lw.attn_norm));
    if (fused) {
      PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_qkv"), lw.wqkv));
    } else {
      PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_q"), lw.wq));
      PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_k"), lw.wk));
      PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_v"), lw.wv));
    }
    if (c.qkv_bias) {
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_q", "bias"), lw.q_bias));
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_k", "bias"), lw.k_bias));
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_v", "bias"), lw.v_bias));
    }
    if (c.qk_norm) {
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_q_norm"), lw.q_norm));
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_k_norm"), lw.k_norm));
    }
    PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_output"), lw.wo));
    if (c.post_norms) {
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "post_attention_norm"), lw.post_attn_norm));
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "post_ffw_norm"), lw.post_ffn_norm));
    }
    PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "ffn_norm"), lw.ffn_norm));
    if (lw.moe.n_experts() > 0) {
      PARALLM_RETURN_IF_ERROR(EmitMoe(l, lw.moe, sink));
      continue;
    }
    if (fused) {
      PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_up"), lw.w_gate_up));
    } else {
      PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_gate"), lw.w_gate));
      PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_up"), lw.w_up));
    }
    PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_down"), lw.w_down));
  }
  PARALLM_RETURN_IF_ERROR(vector("output_norm.weight", w.output_norm));
  if (!c.tied_embeddings) PARALLM_RETURN_IF_ERROR(matrix("output.weight", w.output));
  return EmitRopeTensors(c, sink);
}

ModelWriter::ModelWriter(const ModelConfig& config, RopeStyle source_rope_style, const WriteOptions& options,
                         Vocab vocab)
    : config_(config), source_rope_(source_rope_style), options_(options), vocab_(std::move(vocab)) {
  const ArchSpec& spec = SpecFor(config.arch);
  target_rope_ = options.format == ModelFormat::kGguf ? spec.gguf_rope_style : RopeStyle::kHalf;
  if (options_.format != ModelFormat::kGguf) return;
  const std::string arch = GgufArchitectureFor(config);
  const std::string p = arch + ".";
  gguf_.Set("general.architecture", GgufValue::String(arch));
  gguf_.Set("general.name", GgufValue::String(options.name));
  gguf_.Set(p + "context_length", GgufValue::U32(static_cast<uint32_t>(config.context_length)));
  gguf_.Set(p + "embedding_length", GgufValue::U32(static_cast<uint32_t>(config.hidden)));
  gguf_.Set(p + "block_count", GgufValue::U32(static_cast<uint32_t>(config.n_layers)));
  gguf_.Set(p + "feed_forward_length", GgufValue::U32(static_cast<uint32_t>(config.ffn)));
  gguf_.Set(p + "attention.head_count", GgufValue::U32(static_cast<uint32_t>(config.n_heads)));
  gguf_.Set(p + "attention.head_count_kv", GgufValue::U32(static_cast<uint32_t>(config.n_kv_heads)));
  gguf_.Set(p + "attention.key_length", GgufValue::U32(static_cast<uint32_t>(config.head_dim)));
  gguf_.Set(p + "attention.value_length", GgufValue::U32(static_cast<uint32_t>(config.head_dim)));
  gguf_.Set(p + "attention.layer_norm_rms_epsilon", GgufValue::F32(config.rms_eps));
  gguf_.Set(p + "rope.freq_base", GgufValue::F32(config.rope_theta));
  gguf_.Set(p + "vocab_size", GgufValue::U32(static_cast<uint32_t>(config.vocab)));
  WriteGgufExtras(config, spec, gguf_);
  vocab_.WriteGguf(gguf_);
}

bool ModelWriter::UseMoreBits(const std::string& name) const {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return false;
  if (name.find("attn_v.") == std::string::npos && name.find("ffn_down.") == std::string::npos) return false;
  const int n = config_.n_layers;
  return layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2;
}

DType ModelWriter::GgufTypeFor(const std::string& name, int64_t cols) const {
  DType type = options_.gguf_type;
  if (options_.q4_k_m) {
    // llama.cpp's Q4_K_M recipe, simplified: more bits where errors hurt most.
    type = UseMoreBits(name) ? DType::kQ6_K : DType::kQ4_K;
    if (name == "output.weight" || (config_.tied_embeddings && name == "token_embd.weight")) type = DType::kQ6_K;
  }
  if (cols % Info(type).block_elements != 0) {
    // K-quants need rows of 256; llama.cpp falls back to a 32-block type too.
    type = type == DType::kQ6_K ? DType::kQ8_0 : (type == DType::kQ4_K ? DType::kQ4_0 : DType::kF32);
    if (cols % Info(type).block_elements != 0) type = DType::kF32;
  }
  return type;
}

MlxAffineParams ModelWriter::MlxParamsFor(const std::string& name) const {
  MlxAffineParams p = options_.mlx;
  if (options_.mlx_high_bits > 0 && (UseMoreBits(name) || name == "output.weight")) p.bits = options_.mlx_high_bits;
  // mlx-lm's MoE models keep the router (and Qwen2-MoE's shared expert gate) at 8 bits.
  if (name.find(".ffn_gate_inp") != std::string::npos) p.bits = std::max(p.bits, 8);
  return p;
}

Status ModelWriter::Add(const std::string& name, std::vector<int64_t> shape, std::vector<float> values) {
  if (config_.hybrid() && options_.format == ModelFormat::kGguf && config_.layer_pattern.find('-') != std::string::npos &&
      config_.layer_pattern.find('E') != std::string::npos)
    return Err("pattern {}: llama.cpp's nemotron_h GGUF holds MLP layers (-) or experts (E), not both (its layer "
               "arrays cannot tell them apart); give a --pattern with one of them",
               config_.layer_pattern);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n != static_cast<int64_t>(values.size()))
    return Err("tensor '{}': shape {} does not match {} values", name, ShapeString(shape), values.size());
  if (shape.size() == 3 && options_.format == ModelFormat::kHfFolder) {
    // Stacked experts (blk.L.ffn_gate_exps) -> one tensor per expert, as Hugging Face stores them.
    const size_t at = name.find("_exps.");
    if (at == std::string::npos) return Err("tensor '{}': a 3-D tensor that is not a stack of experts", name);
    const int64_t per = shape[1] * shape[2];
    for (int64_t e = 0; e < shape[0]; ++e) {
      std::vector<float> one(values.begin() + e * per, values.begin() + (e + 1) * per);
      PARALLM_RETURN_IF_ERROR(Add(fmt::format("{}.{}.weight", name.substr(0, at), e), {shape[1], shape[2]}, std::move(one)));
    }
    return Status::Ok();
  }
  if (options_.format != ModelFormat::kGguf && name.find(".ffn_gate_inp_shexp.") != std::string::npos && shape.size() == 1)
    shape = {1, shape[0]};  // Hugging Face's shared_expert_gate is a Linear(hidden, 1)
  if (config_.hybrid() && options_.format == ModelFormat::kGguf) {
    // llama.cpp's shapes: A and D as [heads, 1], the gated norm's weight as [groups, inner / groups].
    if (EndsWith(name, ".ssm_a") || EndsWith(name, ".ssm_d")) shape = {n, 1};
    if (EndsWith(name, ".ssm_norm.weight")) shape = {config_.ssm_groups, n / config_.ssm_groups};
  }
  const bool matrix = shape.size() >= 2;  // 3-D: experts stacked, [n_experts * rows, cols] as far as types go
  const int64_t cols = shape.back(), rows = matrix ? n / cols : 1;
  if (IsRopeProjection(name)) {
    // Q/K rows (and their biases) move between RoPE pairings. Q/K norms (Qwen3) would need it too, but only
    // families whose GGUF and HF pairings agree have them.
    int heads = name.find(".attn_q.") != std::string::npos ? config_.n_heads : config_.n_kv_heads;
    values = PermuteRopeRows(values, matrix ? rows : n, matrix ? cols : 1, heads, source_rope_, target_rope_);
  }
  if (options_.format == ModelFormat::kGguf) {
    // The router stays f32, as llama.cpp's quantizer leaves ffn_gate_inp; so do the Mamba-2 conv filter, A, D and
    // the gated norm (its quantizer skips ssm_conv1d and *_norm.weight; A and D are not weights to it).
    const bool router = name.find(".ffn_gate_inp.") != std::string::npos;
    const bool ssm_small = name.find(".ssm_") != std::string::npos && !EndsWith(name, ".ssm_in.weight") &&
                           !EndsWith(name, ".ssm_out.weight");
    DType type = matrix && !router && !ssm_small ? GgufTypeFor(name, cols) : DType::kF32;
    auto bytes = Quantize(type, values, rows, cols);
    return gguf_.AddTensor(name, type, std::move(shape), std::move(*bytes));
  }
  auto hf = HfNameFor(name, config_.arch);
  if (!hf) return Status::Ok();  // e.g. rope_freqs.weight: config.json carries rope_scaling instead
  if (config_.hybrid()) {
    // Mamba-2 as the published checkpoints store it: A as A_log (A = -exp(A_log)), the conv filter as torch's Conv1d
    // [conv_dim, 1, kernel] (mlx-lm's sanitized folders: MLX's [conv_dim, kernel, 1]; the same values in order).
    if (EndsWith(name, ".ssm_a"))
      for (float& v : values) v = std::log(-v);
    if (EndsWith(name, ".ssm_conv1d.weight") && shape.size() == 2)
      shape = options_.format == ModelFormat::kMlxFolder ? std::vector<int64_t>{shape[0], shape[1], 1}
                                                          : std::vector<int64_t>{shape[0], 1, shape[1]};
  }
  if (const float offset = SpecFor(config_.arch).hf_norm_offset; offset != 0 && EndsWith(name, "norm.weight"))
    for (float& v : values) v -= offset;  // Gemma's files store w for the multiplier 1 + w
  const MlxAffineParams p = MlxParamsFor(name);
  const bool quantize = options_.format == ModelFormat::kMlxFolder && matrix && cols % p.group_size == 0;
  auto keep = [&](const std::string& tensor_name, DType type, std::vector<int64_t> tensor_shape,
                  std::shared_ptr<std::vector<uint8_t>> bytes) {
    TensorView v;
    v.dtype = type;
    v.shape = std::move(tensor_shape);
    v.data = bytes->data();
    v.nbytes = bytes->size();
    folder_tensors_.tensors[tensor_name] = v;
    folder_buffers_.push_back(std::move(bytes));
  };
  if (!quantize) {
    keep(*hf, options_.float_type, shape, Quantize(options_.float_type, values, rows, cols));
    return Status::Ok();
  }
  const int64_t words = cols * p.bits / 32, groups = cols / p.group_size;
  const size_t scale_bytes = Info(options_.float_type).block_bytes;
  auto codes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * words) * 4);
  auto scales = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * groups) * scale_bytes);
  auto biases = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * groups) * scale_bytes);
  for (int64_t r = 0; r < rows; ++r)
    MlxQuantizeRow(p, values.data() + r * cols, cols, options_.float_type,
                   reinterpret_cast<uint32_t*>(codes->data()) + r * words,
                   scales->data() + static_cast<size_t>(r * groups) * scale_bytes,
                   biases->data() + static_cast<size_t>(r * groups) * scale_bytes);
  std::string module = hf->substr(0, hf->size() - std::string(".weight").size());
  if (p.bits != options_.mlx.bits || p.group_size != options_.mlx.group_size)
    mlx_overrides_[module] = boost::json::object{{"group_size", p.group_size}, {"bits", p.bits}};
  auto with_last = [&](int64_t last) {
    std::vector<int64_t> s = shape;
    s.back() = last;
    return s;
  };
  keep(*hf, DType::kU32, with_last(words), codes);
  keep(module + ".scales", options_.float_type, with_last(groups), scales);
  keep(module + ".biases", options_.float_type, with_last(groups), biases);
  return Status::Ok();
}

Status ModelWriter::AddRandom(const std::string& name, std::vector<int64_t> shape, float half_width, uint64_t seed) {
  if (options_.format != ModelFormat::kGguf) return Err("tensor '{}': random tensors are written directly to GGUF only", name);
  if (shape.size() < 2) return Err("tensor '{}': AddRandom takes matrices", name);
  const int64_t cols = shape.back();
  const bool router = name.find(".ffn_gate_inp.") != std::string::npos;  // f32, as Add keeps it
  const DType type = router ? DType::kF32 : GgufTypeFor(name, cols);
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the name: one stream per tensor
  for (char ch : name) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  const uint64_t stream = seed ^ h;
  return gguf_.AddGeneratedTensor(name, type, std::move(shape), [type, cols, half_width, stream](int64_t r0, int64_t r1, uint8_t* out) {
    RandomRows(type, cols, half_width, stream, r0, r1, out);
  });
}

Result<LoadedModel> ModelWriter::FinishInMemory(const std::string& label) {
  if (options_.format != ModelFormat::kGguf) return Err("{}: only GGUF-typed models can be built in memory", label);
  ModelConfig config = config_;
  config.rope_style = target_rope_;
  PARALLM_ASSIGN_OR_RETURN(LoadedModel m, BindModel(config, gguf_.Tensors(), label));
  m.vocab = vocab_;
  if (vocab_.eos >= 0) m.eos_ids = {vocab_.eos};
  return m;
}

Status ModelWriter::Finish(const std::string& path) {
  if (options_.format == ModelFormat::kGguf) return gguf_.Write(path);
  const ArchSpec& spec = SpecFor(config_.arch);
  const ModelConfig& c = config_;
  boost::json::object cfg;
  cfg["architectures"] = boost::json::array{boost::json::string(spec.hf_architecture)};
  cfg["model_type"] = boost::json::string(spec.hf_model_type);
  cfg["hidden_size"] = c.hidden;
  cfg["intermediate_size"] = c.ffn;
  cfg["num_hidden_layers"] = c.n_layers;
  cfg["num_attention_heads"] = c.n_heads;
  cfg["num_key_value_heads"] = c.n_kv_heads;
  cfg["head_dim"] = c.head_dim;
  cfg["hidden_act"] = "silu";
  cfg["max_position_embeddings"] = c.context_length;
  cfg["rms_norm_eps"] = c.rms_eps;
  cfg["rope_theta"] = c.rope_theta;
  cfg["vocab_size"] = c.vocab;
  cfg["tie_word_embeddings"] = c.tied_embeddings;
  cfg["attention_bias"] = c.qkv_bias;
  cfg["torch_dtype"] = options_.float_type == DType::kBF16 ? "bfloat16" : (options_.float_type == DType::kF16 ? "float16" : "float32");
  if (vocab_.bos >= 0) cfg["bos_token_id"] = vocab_.bos;
  if (vocab_.eos >= 0) cfg["eos_token_id"] = vocab_.eos;
  if (!c.rope_freq_factors.empty()) {
    if (!c.rope_llama3)
      return Err("{}: the model has Llama-3 RoPE factors but not the parameters config.json needs", path);
    boost::json::object rs;
    rs["rope_type"] = "llama3";
    rs["factor"] = c.rope_llama3->factor;
    rs["low_freq_factor"] = c.rope_llama3->low_freq_factor;
    rs["high_freq_factor"] = c.rope_llama3->high_freq_factor;
    rs["original_max_position_embeddings"] = c.rope_llama3->original_max_position;
    cfg["rope_scaling"] = rs;
  }
  WriteHfExtras(c, spec, cfg);
  if (options_.format == ModelFormat::kMlxFolder) {
    boost::json::object q;
    q["group_size"] = options_.mlx.group_size;
    q["bits"] = options_.mlx.bits;
    for (const auto& [module, params] : mlx_overrides_) q[module] = params;
    cfg["quantization"] = q;
    cfg["quantization_config"] = q;
  }
  folder_tensors_.owners.assign(folder_buffers_.begin(), folder_buffers_.end());
  return WriteHfFolder(path, cfg, folder_tensors_, options_.max_shard_bytes);
}

}  // namespace parallm
