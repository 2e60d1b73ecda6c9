// Model loading: format detection, ModelConfig from GGUF metadata / config.json / llama2.c header, and
// weight binding with shape and type checks, so a wrong or damaged file is a clear error, not a crash.
#include "model/loader.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "formats/gguf.h"
#include "formats/hf_folder.h"
#include "formats/llama2c.h"
#include "model/arch/arch.h"
#include "model/family_config.h"
#include "model/tensor_names.h"
#include "tensor/quant.h"
#include "util/strings.h"

namespace parallm {
namespace {

void AddEosId(std::vector<int32_t>& ids, int32_t id) {
  if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
}

// Where the binder finds a tensor: by canonical name, plus the MLX params of quantized modules.
struct TensorSource {
  std::function<const TensorView*(const std::string& canonical)> find;
  std::function<std::optional<MlxAffineParams>(const std::string& canonical)> mlx_params;  // null: none
  std::function<std::string(const std::string& canonical)> display_name;
  // Added to every norm weight to get the multiplier the norm applies (Gemma's Hugging Face (1 + w)).
  float norm_offset = 0;
  // Mamba-2's A is stored as A_log (Hugging Face / MLX: A = -exp(A_log)) rather than as A itself (llama.cpp).
  bool a_is_log = false;
};

class WeightBinder {
 public:
  WeightBinder(const TensorSource& source, const std::string& path) : source_(source), path_(path) {}

  // A [rows, cols] matrix; with stack > 0, a [stack, rows, cols] tensor (experts) as one [stack * rows, cols]
  // matrix whose row blocks are sliced out by the caller.
  Result<MatrixView> Matrix(const std::string& name, int64_t rows, int64_t cols, int64_t stack = 0) {
    std::string shown = source_.display_name(name);
    if (source_.mlx_params) {
      if (auto params = source_.mlx_params(name)) return MlxMatrix(name, shown, *params, rows, cols, stack);
    }
    const TensorView* t = source_.find(name);
    if (t == nullptr) return Err("{}: missing tensor '{}'", path_, shown);
    const DTypeInfo& info = Info(t->dtype);
    if (!info.is_float && !info.is_block_quantized)
      return Err("{}: tensor '{}' has type {}, which cannot be a weight matrix", path_, shown, info.name);
    if (!HasShape(*t, stack, rows, cols))
      return Err("{}: tensor '{}' has shape {}, expected {}", path_, shown, ShapeString(t->shape), Expected(stack, rows, cols));
    if (cols % info.block_elements != 0)
      return Err("{}: tensor '{}' has {} columns, not a multiple of the {} block size {}", path_, shown, cols,
                 info.name, info.block_elements);
    MatrixView m;
    m.kind = MatrixView::Kind::kDense;
    m.dtype = t->dtype;
    m.rows = rows * std::max<int64_t>(stack, 1);
    m.cols = cols;
    m.data = t->data;
    m.row_bytes = RowBytes(t->dtype, cols);
    Count(info.name);
    return m;
  }

  // The n_experts matrices [rows, cols] of an expert projection (`kind`: ffn_gate, ffn_up, ffn_down): slices of
  // the stacked blk.L.<kind>_exps (GGUF, MLX's switch_mlp) or, when there is none, blk.L.<kind>.E one by one
  // (Hugging Face's mlp.experts.E.*, older llama.cpp Mixtral files).
  Result<std::vector<MatrixView>> Experts(int layer, const std::string& kind, int n_experts, int64_t rows, int64_t cols) {
    std::vector<MatrixView> out;
    const std::string stacked = LayerTensor(layer, (kind + "_exps").c_str());
    if (Has(stacked)) {
      PARALLM_ASSIGN_OR_RETURN(MatrixView all, Matrix(stacked, rows, cols, n_experts));
      for (int e = 0; e < n_experts; ++e) out.push_back(SliceRows(all, e * rows, rows));
      return out;
    }
    for (int e = 0; e < n_experts; ++e) {
      PARALLM_ASSIGN_OR_RETURN(MatrixView m, Matrix(fmt::format("blk.{}.{}.{}.weight", layer, kind, e), rows, cols));
      out.push_back(m);
    }
    return out;
  }

  // A matrix held in f32 whatever its stored type (the router, computed in f32 so that quantization noise does not
  // flip which experts a token picks); `owner` receives the converted copy when one is made.
  Result<MatrixView> F32Matrix(const std::string& name, int64_t rows, int64_t cols, ModelWeights* owner) {
    PARALLM_ASSIGN_OR_RETURN(MatrixView m, Matrix(name, rows, cols));
    if (m.kind == MatrixView::Kind::kDense && m.dtype == DType::kF32) return m;
    auto values = std::make_shared<std::vector<float>>(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) DequantizeMatrixRow(m, r, values->data() + r * cols);
    MatrixView f;
    f.dtype = DType::kF32;
    f.rows = rows;
    f.cols = cols;
    f.data = reinterpret_cast<const uint8_t*>(values->data());
    f.row_bytes = static_cast<size_t>(cols) * sizeof(float);
    owner->converted.push_back(std::move(values));
    return f;
  }

  // A vector stored as [n] (GGUF) or as a one-row matrix [1, n] (a Hugging Face Linear(n, 1); MLX may quantize it).
  Result<std::vector<float>> VectorOrRow(const std::string& name, int64_t n) {
    const TensorView* t = source_.find(name);
    if (t != nullptr && t->Rank() == 1) return Vector(name, n);
    PARALLM_ASSIGN_OR_RETURN(MatrixView m, Matrix(name, 1, n));
    std::vector<float> v(static_cast<size_t>(n));
    DequantizeMatrixRow(m, 0, v.data());
    return v;
  }

  Result<std::vector<float>> Vector(const std::string& name, int64_t n) {
    std::string shown = source_.display_name(name);
    const TensorView* t = source_.find(name);
    if (t == nullptr) return Err("{}: missing tensor '{}'", path_, shown);
    if (t->NumElements() != n || t->Rank() != 1)
      return Err("{}: tensor '{}' has shape {}, expected [{}]", path_, shown, ShapeString(t->shape), n);
    if (!Info(t->dtype).is_float) return Err("{}: tensor '{}' has type {}, expected a float type", path_, shown, Name(t->dtype));
    std::vector<float> v(static_cast<size_t>(n));
    DequantizeRow(t->dtype, t->data, v.data(), n);
    Count(Name(t->dtype));
    return v;
  }

  // A float tensor of `n` values whatever its shape (Hugging Face's conv1d [C, 1, K], llama.cpp's [C, K]).
  Result<std::vector<float>> Flat(const std::string& name, int64_t n) {
    std::string shown = source_.display_name(name);
    const TensorView* t = source_.find(name);
    if (t == nullptr) return Err("{}: missing tensor '{}'", path_, shown);
    if (t->NumElements() != n)
      return Err("{}: tensor '{}' has shape {}, expected {} values", path_, shown, ShapeString(t->shape), n);
    if (!Info(t->dtype).is_float) return Err("{}: tensor '{}' has type {}, expected a float type", path_, shown, Name(t->dtype));
    std::vector<float> v(static_cast<size_t>(n));
    DequantizeRow(t->dtype, t->data, v.data(), n);
    Count(Name(t->dtype));
    return v;
  }

  bool a_is_log() const { return source_.a_is_log; }

  // A norm's weights as the multiplier it applies.
  Result<std::vector<float>> Norm(const std::string& name, int64_t n) {
    PARALLM_ASSIGN_OR_RETURN(std::vector<float> v, Vector(name, n));
    for (float& x : v) x += source_.norm_offset;
    return v;
  }

  bool Has(const std::string& name) const { return source_.find(name) != nullptr; }
  std::string Summary() const {
    std::string s;
    for (const auto& [type, count] : counts_) s += fmt::format("{}{} x {}", s.empty() ? "" : ", ", type, count);
    return s;
  }

 private:
  static bool HasShape(const TensorView& t, int64_t stack, int64_t rows, int64_t cols) {
    if (stack > 0) return t.Rank() == 3 && t.Dim(0) == stack && t.Dim(1) == rows && t.Dim(2) == cols;
    return t.Rank() == 2 && t.Dim(0) == rows && t.Dim(1) == cols;
  }
  static std::string Expected(int64_t stack, int64_t rows, int64_t cols) {
    return stack > 0 ? fmt::format("[{}, {}, {}]", stack, rows, cols) : fmt::format("[{}, {}]", rows, cols);
  }

  Result<MatrixView> MlxMatrix(const std::string& name, const std::string& shown, const MlxAffineParams& p,
                               int64_t rows, int64_t cols, int64_t stack) {
    std::string base = name.substr(0, name.size() - std::string("weight").size());
    const TensorView* w = source_.find(name);
    const TensorView* scales = source_.find(base + "scales");
    const TensorView* biases = source_.find(base + "biases");
    if (w == nullptr) return Err("{}: missing tensor '{}'", path_, shown);
    if (w->dtype != DType::kU32)
      return Err("{}: tensor '{}' has scales but type {}, expected u32 packed codes", path_, shown, Name(w->dtype));
    if (scales == nullptr || biases == nullptr)
      return Err("{}: quantized tensor '{}' has no .scales/.biases beside it", path_, shown);
    if (cols % p.group_size != 0 || (cols * p.bits) % 32 != 0)
      return Err("{}: tensor '{}' has {} columns, not a multiple of group size {}", path_, shown, cols, p.group_size);
    int64_t packed = cols * p.bits / 32, groups = cols / p.group_size;
    if (!HasShape(*w, stack, rows, packed))
      return Err("{}: tensor '{}' has shape {}, expected {} ({}-bit codes of {} columns)", path_, shown,
                 ShapeString(w->shape), Expected(stack, rows, packed), p.bits, cols);
    for (const TensorView* sb : {scales, biases}) {
      if (!HasShape(*sb, stack, rows, groups))
        return Err("{}: scales/biases of '{}' have shape {}, expected {} (group size {})", path_, shown,
                   ShapeString(sb->shape), Expected(stack, rows, groups), p.group_size);
      if (sb->dtype != DType::kF32 && sb->dtype != DType::kF16 && sb->dtype != DType::kBF16)
        return Err("{}: scales/biases of '{}' have type {}, expected f16, bf16 or f32", path_, shown, Name(sb->dtype));
    }
    if (scales->dtype != biases->dtype)
      return Err("{}: scales and biases of '{}' differ in type", path_, shown);
    MatrixView m;
    m.kind = MatrixView::Kind::kMlxAffine;
    m.dtype = scales->dtype;
    m.rows = rows * std::max<int64_t>(stack, 1);
    m.cols = cols;
    m.data = w->data;
    m.row_bytes = static_cast<size_t>(packed) * 4;
    m.mlx = p;
    m.scales = scales->data;
    m.biases = biases->data;
    Count(fmt::format("mlx{}", p.bits));
    return m;
  }

  void Count(std::string_view type) { counts_[std::string(type)]++; }

  TensorSource source_;
  std::string path_;
  std::map<std::string, int> counts_;
};

// The router, the experts and the shared expert of sparse layer `l`.
Status BindMoe(const ModelConfig& c, int l, WeightBinder& b, ModelWeights* w, MoeWeights& moe) {
  const int64_t H = c.hidden, F = c.expert_ffn, S = c.shared_expert_ffn;
  PARALLM_ASSIGN_OR_RETURN(moe.router, b.F32Matrix(LayerTensor(l, "ffn_gate_inp"), c.n_experts, H, w));
  PARALLM_ASSIGN_OR_RETURN(moe.gate, b.Experts(l, "ffn_gate", c.n_experts, F, H));
  PARALLM_ASSIGN_OR_RETURN(moe.up, b.Experts(l, "ffn_up", c.n_experts, F, H));
  PARALLM_ASSIGN_OR_RETURN(moe.down, b.Experts(l, "ffn_down", c.n_experts, H, F));
  if (S > 0) {
    PARALLM_ASSIGN_OR_RETURN(moe.shared_gate, b.Matrix(LayerTensor(l, "ffn_gate_shexp"), S, H));
    PARALLM_ASSIGN_OR_RETURN(moe.shared_up, b.Matrix(LayerTensor(l, "ffn_up_shexp"), S, H));
    PARALLM_ASSIGN_OR_RETURN(moe.shared_down, b.Matrix(LayerTensor(l, "ffn_down_shexp"), H, S));
    PARALLM_ASSIGN_OR_RETURN(moe.shared_expert_gate, b.VectorOrRow(LayerTensor(l, "ffn_gate_inp_shexp"), H));
  }
  return Status::Ok();
}

// The final norm and the LM head (the embedding matrix itself when tied), after every layer.
Status BindOutputHead(const ModelConfig& c, WeightBinder& b, ModelWeights* w) {
  PARALLM_ASSIGN_OR_RETURN(w->output_norm, b.Norm("output_norm.weight", c.hidden));
  if (c.tied_embeddings) {
    w->output = w->token_embd;
  } else {
    PARALLM_ASSIGN_OR_RETURN(w->output, b.Matrix("output.weight", c.vocab, c.hidden));
  }
  return Status::Ok();
}

// A hybrid (Nemotron-H) model: each layer's norm and its one mixer; experts and MLPs ungated.
Status BindHybridWeights(const ModelConfig& c, WeightBinder& b, ModelWeights* w) {
  const int64_t H = c.hidden, Q = c.q_dim(), KV = c.kv_dim(), F = c.ffn, V = c.vocab;
  const int64_t I = c.ssm_inner(), CD = c.ssm_conv_dim(), NH = c.ssm_heads;
  PARALLM_ASSIGN_OR_RETURN(w->token_embd, b.Matrix("token_embd.weight", V, H));
  w->layers.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights& lw = w->layers[static_cast<size_t>(l)];
    PARALLM_ASSIGN_OR_RETURN(lw.attn_norm, b.Norm(LayerTensor(l, "attn_norm"), H));
    switch (c.KindOf(l)) {
      case LayerKind::kMamba: {
        MambaWeights& m = lw.mamba;
        PARALLM_ASSIGN_OR_RETURN(m.in_proj, b.Matrix(LayerTensor(l, "ssm_in"), c.ssm_in_proj(), H));
        PARALLM_ASSIGN_OR_RETURN(m.conv, b.Flat(LayerTensor(l, "ssm_conv1d"), CD * c.ssm_conv_kernel));
        if (b.Has(LayerTensor(l, "ssm_conv1d", "bias"))) {
          PARALLM_ASSIGN_OR_RETURN(m.conv_bias, b.Flat(LayerTensor(l, "ssm_conv1d", "bias"), CD));
        }
        PARALLM_ASSIGN_OR_RETURN(m.dt_bias, b.Flat(LayerTensor(l, "ssm_dt", "bias"), NH));
        PARALLM_ASSIGN_OR_RETURN(m.a, b.Flat(fmt::format("blk.{}.ssm_a", l), NH));
        if (b.a_is_log())
          for (float& a : m.a) a = -std::exp(a);
        PARALLM_ASSIGN_OR_RETURN(m.d, b.Flat(fmt::format("blk.{}.ssm_d", l), NH));
        PARALLM_ASSIGN_OR_RETURN(m.norm, b.Flat(LayerTensor(l, "ssm_norm"), I));
        PARALLM_ASSIGN_OR_RETURN(m.out_proj, b.Matrix(LayerTensor(l, "ssm_out"), H, I));
        break;
      }
      case LayerKind::kAttention: {
        PARALLM_ASSIGN_OR_RETURN(lw.wq, b.Matrix(LayerTensor(l, "attn_q"), Q, H));
        PARALLM_ASSIGN_OR_RETURN(lw.wk, b.Matrix(LayerTensor(l, "attn_k"), KV, H));
        PARALLM_ASSIGN_OR_RETURN(lw.wv, b.Matrix(LayerTensor(l, "attn_v"), KV, H));
        PARALLM_ASSIGN_OR_RETURN(lw.wo, b.Matrix(LayerTensor(l, "attn_output"), H, Q));
        break;
      }
      case LayerKind::kMlp: {
        PARALLM_ASSIGN_OR_RETURN(lw.w_up, b.Matrix(LayerTensor(l, "ffn_up"), F, H));
        PARALLM_ASSIGN_OR_RETURN(lw.w_down, b.Matrix(LayerTensor(l, "ffn_down"), H, F));
        break;
      }
      case LayerKind::kMoe: {
        MoeWeights& moe = lw.moe;
        const int64_t EF = c.expert_ffn, S = c.shared_expert_ffn;
        PARALLM_ASSIGN_OR_RETURN(moe.router, b.F32Matrix(LayerTensor(l, "ffn_gate_inp"), c.n_experts, H, w));
        PARALLM_ASSIGN_OR_RETURN(moe.score_bias, b.Flat(LayerTensor(l, "exp_probs_b", "bias"), c.n_experts));
        PARALLM_ASSIGN_OR_RETURN(moe.up, b.Experts(l, "ffn_up", c.n_experts, EF, H));
        PARALLM_ASSIGN_OR_RETURN(moe.down, b.Experts(l, "ffn_down", c.n_experts, H, EF));
        if (S > 0) {
          PARALLM_ASSIGN_OR_RETURN(moe.shared_up, b.Matrix(LayerTensor(l, "ffn_up_shexp"), S, H));
          PARALLM_ASSIGN_OR_RETURN(moe.shared_down, b.Matrix(LayerTensor(l, "ffn_down_shexp"), H, S));
        }
        break;
      }
    }
  }
  return BindOutputHead(c, b, w);
}

Status BindWeights(const ModelConfig& c, WeightBinder& b, ModelWeights* w) {
  if (c.hybrid()) return BindHybridWeights(c, b, w);
  const int64_t H = c.hidden, Q = c.q_dim(), KV = c.kv_dim(), F = c.ffn, V = c.vocab;
  const bool fused = SpecFor(c.arch).fused_projections;
  PARALLM_ASSIGN_OR_RETURN(w->token_embd, b.Matrix("token_embd.weight", V, H));
  w->layers.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights& lw = w->layers[static_cast<size_t>(l)];
    PARALLM_ASSIGN_OR_RETURN(lw.attn_norm, b.Norm(LayerTensor(l, "attn_norm"), H));
    if (fused) {
      PARALLM_ASSIGN_OR_RETURN(lw.wqkv, b.Matrix(LayerTensor(l, "attn_qkv"), Q + 2 * KV, H));
      lw.wq = SliceRows(lw.wqkv, 0, Q);
      lw.wk = SliceRows(lw.wqkv, Q, KV);
      lw.wv = SliceRows(lw.wqkv, Q + KV, KV);
    } else {
      PARALLM_ASSIGN_OR_RETURN(lw.wq, b.Matrix(LayerTensor(l, "attn_q"), Q, H));
      PARALLM_ASSIGN_OR_RETURN(lw.wk, b.Matrix(LayerTensor(l, "attn_k"), KV, H));
      PARALLM_ASSIGN_OR_RETURN(lw.wv, b.Matrix(LayerTensor(l, "attn_v"), KV, H));
    }
    PARALLM_ASSIGN_OR_RETURN(lw.wo, b.Matrix(LayerTensor(l, "attn_output"), H, Q));
    if (c.qkv_bias) {
      PARALLM_ASSIGN_OR_RETURN(lw.q_bias, b.Vector(LayerTensor(l, "attn_q", "bias"), Q));
      PARALLM_ASSIGN_OR_RETURN(lw.k_bias, b.Vector(LayerTensor(l, "attn_k", "bias"), KV));
      PARALLM_ASSIGN_OR_RETURN(lw.v_bias, b.Vector(LayerTensor(l, "attn_v", "bias"), KV));
    }
    if (c.qk_norm) {
      PARALLM_ASSIGN_OR_RETURN(lw.q_norm, b.Norm(LayerTensor(l, "attn_q_norm"), c.head_dim));
      PARALLM_ASSIGN_OR_RETURN(lw.k_norm, b.Norm(LayerTensor(l, "attn_k_norm"), c.head_dim));
    }
    if (c.post_norms) {
      PARALLM_ASSIGN_OR_RETURN(lw.post_attn_norm, b.Norm(LayerTensor(l, "post_attention_norm"), H));
      PARALLM_ASSIGN_OR_RETURN(lw.post_ffn_norm, b.Norm(LayerTensor(l, "post_ffw_norm"), H));
    }
    PARALLM_ASSIGN_OR_RETURN(lw.ffn_norm, b.Norm(LayerTensor(l, "ffn_norm"), H));
    if (c.LayerIsMoe(l)) {
      PARALLM_RETURN_IF_ERROR(BindMoe(c, l, b, w, lw.moe));
      continue;
    }
    if (fused) {
      PARALLM_ASSIGN_OR_RETURN(lw.w_gate_up, b.Matrix(LayerTensor(l, "ffn_up"), 2 * F, H));
      lw.w_gate = SliceRows(lw.w_gate_up, 0, F);
      lw.w_up = SliceRows(lw.w_gate_up, F, F);
    } else {
      PARALLM_ASSIGN_OR_RETURN(lw.w_gate, b.Matrix(LayerTensor(l, "ffn_gate"), F, H));
      PARALLM_ASSIGN_OR_RETURN(lw.w_up, b.Matrix(LayerTensor(l, "ffn_up"), F, H));
    }
    PARALLM_ASSIGN_OR_RETURN(lw.w_down, b.Matrix(LayerTensor(l, "ffn_down"), H, F));
  }
  return BindOutputHead(c, b, w);
}

// Checks the numbers a config must satisfy before any weight is bound.
Status ValidateConfig(const ModelConfig& c, const std::string& path) {
  auto positive = [&](int v, const char* what) -> Status {
    if (v <= 0 || v > (1 << 24)) return Err("{}: {} is {}, expected a positive number", path, what, v);
    return Status::Ok();
  };
  PARALLM_RETURN_IF_ERROR(positive(c.hidden, "hidden size"));
  PARALLM_RETURN_IF_ERROR(positive(c.n_layers, "layer count"));
  PARALLM_RETURN_IF_ERROR(positive(c.n_heads, "attention head count"));
  PARALLM_RETURN_IF_ERROR(positive(c.n_kv_heads, "key/value head count"));
  PARALLM_RETURN_IF_ERROR(positive(c.head_dim, "head dimension"));
  PARALLM_RETURN_IF_ERROR(positive(c.ffn, "feed-forward size"));
  PARALLM_RETURN_IF_ERROR(positive(c.vocab, "vocabulary size"));
  PARALLM_RETURN_IF_ERROR(positive(c.context_length, "context length"));
  if (c.n_heads % c.n_kv_heads != 0)
    return Err("{}: {} attention heads are not a multiple of {} key/value heads", path, c.n_heads, c.n_kv_heads);
  if (c.head_dim % 2 != 0 && !c.hybrid()) return Err("{}: head dimension {} is odd; RoPE needs pairs", path, c.head_dim);
  PARALLM_RETURN_IF_ERROR(ValidateExtras(c, path));
  if (!c.rope_freq_factors.empty() && c.rope_freq_factors.size() != static_cast<size_t>(c.head_dim / 2))
    return Err("{}: rope_freqs has {} entries, expected head_dim/2 = {}", path, c.rope_freq_factors.size(),
               c.head_dim / 2);
  if (!(c.rms_eps > 0) || !(c.rope_theta > 0)) return Err("{}: rms eps and rope theta must be positive", path);
  return Status::Ok();
}

// ---- GGUF ----

Result<LoadedModel> LoadGguf(const std::string& path) {
  PARALLM_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
  auto arch_name = file.GetString("general.architecture");
  if (!arch_name) return Err("{}: no general.architecture key; not a model file (a vocabulary-only GGUF?)", path);
  const ArchSpec* spec = SpecByGgufArchitecture(*arch_name);
  if (spec == nullptr)
    return Err("{}: architecture '{}' is not supported (supported: {})", path, *arch_name, SupportedNames());
  // llama.cpp writes Mixtral as a "llama" file with experts.
  if (spec->arch == Arch::kLlama && file.GetInt("llama.expert_count").value_or(0) > 0) spec = &MixtralSpec();
  const std::string p = *arch_name + ".";
  auto get_int = [&](const std::string& key, std::optional<int64_t> def) -> Result<int> {
    auto v = file.GetInt(p + key);
    if (!v) {
      if (def) return static_cast<int>(*def);
      return Err("{}: missing metadata key '{}{}'", path, p, key);
    }
    if (*v <= 0 || *v > (int64_t{1} << 30)) return Err("{}: metadata '{}{}' = {} is out of range", path, p, key, *v);
    return static_cast<int>(*v);
  };
  LoadedModel m;
  m.format = ModelFormat::kGguf;
  m.path = path;
  ModelConfig& c = m.config;
  c.rope_style = spec->gguf_rope_style;
  PARALLM_ASSIGN_OR_RETURN(c.hidden, get_int("embedding_length", std::nullopt));
  PARALLM_ASSIGN_OR_RETURN(c.n_layers, get_int("block_count", std::nullopt));
  PARALLM_ASSIGN_OR_RETURN(c.n_heads, get_int("attention.head_count", std::nullopt));
  // Hybrid files give feed_forward_length and head_count_kv per layer (ReadGgufExtras reads them).
  if (spec->arch != Arch::kNemotronH) {
    PARALLM_ASSIGN_OR_RETURN(c.ffn, get_int("feed_forward_length", std::nullopt));
    PARALLM_ASSIGN_OR_RETURN(c.n_kv_heads, get_int("attention.head_count_kv", c.n_heads));
  }
  PARALLM_ASSIGN_OR_RETURN(c.head_dim, get_int("attention.key_length", c.hidden / c.n_heads));
  PARALLM_ASSIGN_OR_RETURN(c.context_length, get_int("context_length", 4096));
  c.rms_eps = static_cast<float>(file.GetFloat(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  c.rope_theta = static_cast<float>(file.GetFloat(p + "rope.freq_base").value_or(10000.0));
  const TensorSet& tensors = file.tensors();
  if (file.tensor_infos().empty()) return Err("{}: contains no tensors (a vocabulary-only GGUF?)", path);
  const TensorView* embd = tensors.Find("token_embd.weight");
  if (embd == nullptr || embd->Rank() != 2) return Err("{}: missing tensor 'token_embd.weight'", path);
  c.vocab = static_cast<int>(embd->Dim(0));
  c.tied_embeddings = tensors.Find("output.weight") == nullptr;
  PARALLM_RETURN_IF_ERROR(ReadGgufExtras(file, *spec, path, c));
  if (const TensorView* rf = tensors.Find("rope_freqs.weight")) {
    if (rf->dtype != DType::kF32 || rf->Rank() != 1)
      return Err("{}: rope_freqs.weight must be a 1-D f32 tensor", path);
    c.rope_freq_factors.resize(static_cast<size_t>(rf->NumElements()));
    DequantizeRow(DType::kF32, rf->data, c.rope_freq_factors.data(), rf->NumElements());
  }
  PARALLM_RETURN_IF_ERROR(ValidateConfig(c, path));
  TensorSource source;
  source.find = [&](const std::string& name) { return tensors.Find(name); };
  source.display_name = [](const std::string& name) { return name; };
  WeightBinder binder(source, path);
  PARALLM_RETURN_IF_ERROR(BindWeights(c, binder, &m.weights));
  m.weight_types = binder.Summary();
  if (file.Find("tokenizer.ggml.tokens") != nullptr) {
    PARALLM_ASSIGN_OR_RETURN(m.vocab, Vocab::FromGguf(file, path));
    AddEosId(m.eos_ids, m.vocab->eos);
    // llama.cpp's end-of-turn and end-of-message tokens end generation too (Phi-3's <|end|>, Gemma's <end_of_turn>).
    for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
      if (auto id = file.GetInt(key); id && *id >= 0 && *id < c.vocab) AddEosId(m.eos_ids, static_cast<int32_t>(*id));
  }
  m.weights.storage = std::move(file.mutable_tensors());
  return m;
}

// ---- Hugging Face / MLX folders ----

Result<LoadedModel> LoadHf(const std::string& dir) {
  PARALLM_ASSIGN_OR_RETURN(HfFolder folder, OpenHfFolder(dir));
  const boost::json::object& cfg = folder.config;
  const std::string cfg_path = dir + "/config.json";
  auto str = [&](const char* key) -> std::optional<std::string> {
    auto it = cfg.find(key);
    if (it == cfg.end() || !it->value().is_string()) return std::nullopt;
    return std::string(it->value().as_string());
  };
  auto num = [&](const char* key) -> std::optional<double> {
    auto it = cfg.find(key);
    if (it == cfg.end()) return std::nullopt;
    if (it->value().is_int64()) return static_cast<double>(it->value().as_int64());
    if (it->value().is_uint64()) return static_cast<double>(it->value().as_uint64());
    if (it->value().is_double()) return it->value().as_double();
    return std::nullopt;
  };
  auto integer = [&](const char* key, std::optional<int> def) -> Result<int> {
    auto v = num(key);
    if (!v) {
      if (def) return *def;
      return Err("{}: missing or non-numeric '{}'", cfg_path, key);
    }
    if (*v != static_cast<double>(static_cast<int64_t>(*v)) || *v <= 0 || *v > (1 << 30))
      return Err("{}: '{}' = {} is not a positive integer", cfg_path, key, *v);
    return static_cast<int>(*v);
  };
  auto model_type = str("model_type");
  if (!model_type) return Err("{}: no model_type", cfg_path);
  // Nemotron-H's layer count is its pattern's length (newer configs leave num_hidden_layers out).
  std::optional<int> default_layers;
  if (auto pattern = str("hybrid_override_pattern")) default_layers = static_cast<int>(pattern->size());
  const ArchSpec* spec = SpecByHfModelType(*model_type);
  if (spec == nullptr)
    return Err("{}: model_type '{}' is not supported (supported model types: {})", cfg_path, *model_type,
               SupportedHfModelTypes());
  LoadedModel m;
  m.format = folder.quantization ? ModelFormat::kMlxFolder : ModelFormat::kHfFolder;
  m.path = dir;
  ModelConfig& c = m.config;
  c.rope_style = RopeStyle::kHalf;
  PARALLM_ASSIGN_OR_RETURN(c.hidden, integer("hidden_size", std::nullopt));
  PARALLM_ASSIGN_OR_RETURN(c.n_layers, integer("num_hidden_layers", default_layers));
  PARALLM_ASSIGN_OR_RETURN(c.ffn, integer("intermediate_size", std::nullopt));
  PARALLM_ASSIGN_OR_RETURN(c.n_heads, integer("num_attention_heads", std::nullopt));
  PARALLM_ASSIGN_OR_RETURN(c.n_kv_heads, integer("num_key_value_heads", c.n_heads));
  PARALLM_ASSIGN_OR_RETURN(c.head_dim, integer("head_dim", c.hidden / c.n_heads));
  PARALLM_ASSIGN_OR_RETURN(c.vocab, integer("vocab_size", std::nullopt));
  PARALLM_ASSIGN_OR_RETURN(c.context_length, integer("max_position_embeddings", 4096));
  c.rms_eps = static_cast<float>(num("rms_norm_eps").value_or(1e-6));
  c.rope_theta = static_cast<float>(num("rope_theta").value_or(10000.0));
  if (auto it = cfg.find("tie_word_embeddings"); it != cfg.end() && it->value().is_bool())
    c.tied_embeddings = it->value().as_bool();
  if (!folder.tensors.Find("lm_head.weight")) c.tied_embeddings = true;
  PARALLM_RETURN_IF_ERROR(ReadHfExtras(cfg, *spec, cfg_path, c));
  if (auto it = cfg.find("rope_scaling"); it != cfg.end() && it->value().is_object()) {
    const auto& rs = it->value().as_object();
    std::string type;
    for (const char* key : {"rope_type", "type"})
      if (auto t = rs.find(key); t != rs.end() && t->value().is_string()) type = std::string(t->value().as_string());
    auto field = [&](const char* key, double def) {
      auto f = rs.find(key);
      if (f == rs.end()) return def;
      if (f->value().is_double()) return f->value().as_double();
      if (f->value().is_int64()) return static_cast<double>(f->value().as_int64());
      return def;
    };
    if (type == "llama3") {
      ModelConfig::Llama3Rope r;
      r.factor = static_cast<float>(field("factor", 8));
      r.low_freq_factor = static_cast<float>(field("low_freq_factor", 1));
      r.high_freq_factor = static_cast<float>(field("high_freq_factor", 4));
      r.original_max_position = static_cast<int>(field("original_max_position_embeddings", 8192));
      c.rope_llama3 = r;
      c.rope_freq_factors = Llama3RopeFactors(c.head_dim, c.rope_theta, r.factor, r.low_freq_factor,
                                              r.high_freq_factor, r.original_max_position);
    } else if (type != "default" && !type.empty() && type != "linear" &&
               !(spec->arch == Arch::kPhi3 && (type == "longrope" || type == "su"))) {
      return Err("{}: rope_scaling type '{}' is not supported for {} (llama3 and linear are{})", cfg_path, type,
                 spec->name, spec->arch == Arch::kPhi3 ? ", and longrope" : "");
    }
  }
  PARALLM_RETURN_IF_ERROR(ValidateConfig(c, dir));
  const TensorSet& tensors = folder.tensors;
  const std::optional<MlxQuantization>& quant = folder.quantization;
  TensorSource source;
  const Arch arch = c.arch;
  // Nemotron-H folders saved by transformers name the backbone "model." where the published ones say "backbone.".
  const bool model_prefix = arch == Arch::kNemotronH && tensors.Find("backbone.embeddings.weight") == nullptr &&
                            tensors.Find("model.embeddings.weight") != nullptr;
  auto hf_name = [arch, model_prefix](const std::string& canonical) -> std::optional<std::string> {
    auto hf = HfNameFor(canonical, arch);
    if (hf && model_prefix && StartsWith(*hf, "backbone.")) return "model." + hf->substr(9);
    return hf;
  };
  source.find = [&](const std::string& canonical) -> const TensorView* {
    auto hf = hf_name(canonical);
    return hf ? tensors.Find(*hf) : nullptr;
  };
  source.display_name = [hf_name](const std::string& canonical) { return hf_name(canonical).value_or(canonical); };
  source.norm_offset = spec->hf_norm_offset;
  source.a_is_log = true;
  if (quant) {
    source.mlx_params = [&](const std::string& canonical) -> std::optional<MlxAffineParams> {
      auto hf = hf_name(canonical);
      if (!hf || !EndsWith(*hf, ".weight")) return std::nullopt;
      std::string module = hf->substr(0, hf->size() - 7);
      if (tensors.Find(module + ".scales") == nullptr) return std::nullopt;  // stored in float
      return quant->ForModule(module);
    };
  }
  WeightBinder binder(source, dir);
  PARALLM_RETURN_IF_ERROR(BindWeights(c, binder, &m.weights));
  m.weight_types = binder.Summary();
  m.weights.storage = std::move(folder.tensors);
  // eos_token_id: an id or a list, in config.json and in generation_config.json (which instruct models use for
  // their end-of-turn tokens).
  auto add_eos = [&](const boost::json::object& o) {
    auto it = o.find("eos_token_id");
    if (it == o.end()) return;
    auto add = [&](const boost::json::value& v) {
      if (v.is_int64() && v.as_int64() >= 0 && v.as_int64() < c.vocab) AddEosId(m.eos_ids, static_cast<int32_t>(v.as_int64()));
    };
    if (it->value().is_array()) {
      for (const boost::json::value& v : it->value().as_array()) add(v);
    } else {
      add(it->value());
    }
  };
  add_eos(cfg);
  if (std::ifstream in(dir + "/generation_config.json"); in) {
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    PARALLM_ASSIGN_OR_RETURN(boost::json::value gen, ParseJson(text, dir + "/generation_config.json"));
    if (gen.is_object()) add_eos(gen.as_object());
  }
  return m;
}

// ---- llama2.c ----

Result<LoadedModel> LoadLlama2c(const std::string& path) {
  PARALLM_ASSIGN_OR_RETURN(Llama2cCheckpoint ckpt, ReadLlama2cCheckpoint(path));
  LoadedModel m;
  m.format = ModelFormat::kLlama2c;
  m.path = path;
  ModelConfig& c = m.config;
  const Llama2cConfig& lc = ckpt.config;
  c.arch = Arch::kLlama;
  c.hidden = lc.dim;
  c.n_layers = lc.n_layers;
  c.n_heads = lc.n_heads;
  c.n_kv_heads = lc.n_kv_heads;
  c.head_dim = lc.dim / lc.n_heads;
  c.ffn = lc.hidden_dim;
  c.vocab = lc.vocab_size;
  c.context_length = lc.seq_len;
  c.rms_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.rope_style = RopeStyle::kInterleaved;  // run.c rotates (x[2i], x[2i+1])
  c.tied_embeddings = lc.shared_classifier;
  PARALLM_RETURN_IF_ERROR(ValidateConfig(c, path));
  const TensorSet& tensors = ckpt.tensors;
  TensorSource source;
  source.find = [&](const std::string& name) { return tensors.Find(name); };
  source.display_name = [](const std::string& name) { return name; };
  WeightBinder binder(source, path);
  PARALLM_RETURN_IF_ERROR(BindWeights(c, binder, &m.weights));
  m.weight_types = binder.Summary();
  m.weights.storage = std::move(ckpt.tensors);
  return m;
}

}  // namespace

Result<LoadedModel> BindModel(const ModelConfig& config, TensorSet tensors, const std::string& label) {
  PARALLM_RETURN_IF_ERROR(ValidateConfig(config, label));
  LoadedModel m;
  m.config = config;
  m.format = ModelFormat::kGguf;
  m.path = label;
  TensorSource source;
  source.find = [&](const std::string& name) { return tensors.Find(name); };
  source.display_name = [](const std::string& name) { return name; };
  WeightBinder binder(source, label);
  PARALLM_RETURN_IF_ERROR(BindWeights(config, binder, &m.weights));
  m.weight_types = binder.Summary();
  m.weights.storage = std::move(tensors);
  return m;
}

namespace {

bool HasGgufMagic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::string_view(magic, 4) == "GGUF";
}

}  // namespace

std::string FormatName(ModelFormat f) {
  switch (f) {
    case ModelFormat::kGguf: return "gguf";
    case ModelFormat::kHfFolder: return "hf";
    case ModelFormat::kMlxFolder: return "mlx";
    case ModelFormat::kLlama2c: return "llama2c";
  }
  return "?";
}

Result<LoadedModel> LoadModel(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return Err("{}: no such file or folder", path);
  if (fs::is_directory(path, ec)) {
    if (!fs::exists(fs::path(path) / "config.json", ec))
      return Err("{}: a folder without config.json; expected a Hugging Face or MLX model folder", path);
    return LoadHf(path);
  }
  if (HasGgufMagic(path)) return LoadGguf(path);
  if (EndsWith(path, ".bin")) return LoadLlama2c(path);
  return Err("{}: not a recognized model (expected a .gguf file, a llama2.c .bin checkpoint, or a Hugging Face / "
             "MLX folder with config.json)",
             path);
}

}  // namespace parallm
