// Family config fields in GGUF metadata and config.json: Gemma 1/2/3, Phi-3, Mistral's sliding window.
#include "model/family_config.h"

#include <cmath>

namespace parallm {
namespace {

// config.json accessors: a missing key and an explicit null both read as absent.
std::optional<double> Number(const boost::json::object& cfg, std::string_view key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return std::nullopt;
  const boost::json::value& v = it->value();
  if (v.is_int64()) return static_cast<double>(v.as_int64());
  if (v.is_uint64()) return static_cast<double>(v.as_uint64());
  if (v.is_double()) return v.as_double();
  return std::nullopt;
}

std::optional<std::string> String(const boost::json::object& cfg, std::string_view key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || !it->value().is_string()) return std::nullopt;
  return std::string(it->value().as_string());
}

Result<std::vector<float>> FloatArray(const boost::json::object& obj, std::string_view key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->value().is_array()) return Err("{}: '{}' must be an array of numbers", where, key);
  std::vector<float> out;
  for (const boost::json::value& v : it->value().as_array()) {
    if (v.is_double()) out.push_back(static_cast<float>(v.as_double()));
    else if (v.is_int64()) out.push_back(static_cast<float>(v.as_int64()));
    else return Err("{}: '{}' must be an array of numbers", where, key);
  }
  return out;
}

boost::json::array ToJson(const std::vector<float>& v) {
  boost::json::array a;
  for (float x : v) a.emplace_back(static_cast<double>(x));
  return a;
}

bool IsGemma(const ArchSpec& spec) { return spec.block == GemmaBlock; }

// llama.cpp has no GGUF key for Gemma's query_pre_attn_scalar: it uses head_dim, and hidden / heads for the 27B
// shapes (Gemma 2: 46 layers, Gemma 3: 62 layers).
float GgufQueryPreAttnScalar(const ModelConfig& c) {
  const bool is_27b = (c.arch == Arch::kGemma2 && c.n_layers == 46) || (c.arch == Arch::kGemma3 && c.n_layers == 62);
  return static_cast<float>(is_27b ? c.hidden / c.n_heads : c.head_dim);
}

Result<std::vector<float>> ReadFactorTensor(const GgufFile& file, const std::string& name, const std::string& path) {
  const TensorView* t = file.tensors().Find(name);
  if (t == nullptr) return Err("{}: LongRoPE needs tensor '{}'", path, name);
  if (t->dtype != DType::kF32 || t->Rank() != 1) return Err("{}: '{}' must be a 1-D f32 tensor", path, name);
  std::vector<float> v(static_cast<size_t>(t->NumElements()));
  std::memcpy(v.data(), t->data, v.size() * sizeof(float));
  return v;
}

std::optional<bool> Bool(const boost::json::object& cfg, std::string_view key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || !it->value().is_bool()) return std::nullopt;
  return it->value().as_bool();
}

}  // namespace

void ApplySpec(const ArchSpec& spec, ModelConfig& c) {
  c.arch = spec.arch;
  c.qkv_bias = spec.qkv_bias;
  c.qk_norm = spec.qk_norm;
  c.activation = spec.activation;
  c.post_norms = spec.post_norms;
  c.sliding_pattern = spec.sliding_pattern;
  c.scale_embeddings = spec.embed_scaled;
  if (spec.moe) c.norm_topk_prob = spec.default_norm_topk_prob;
}

float LongRopeAttnFactor(int max_position, int original_max_position) {
  const double s = static_cast<double>(max_position) / original_max_position;
  if (s <= 1.0) return 1.0f;
  return static_cast<float>(std::sqrt(1.0 + std::log(s) / std::log(static_cast<double>(original_max_position))));
}

namespace {

// A per-layer integer array (llama.cpp's get_key_or_arr keys: feed_forward_length, attention.head_count_kv) of
// `n` entries.
Result<std::vector<int>> LayerArray(const GgufFile& file, const std::string& key, int n, const std::string& path) {
  const GgufValue* v = file.Find(key);
  if (v == nullptr) return Err("{}: missing metadata key '{}'", path, key);
  if (v->type != GgufType::kArray || static_cast<int>(v->array.size()) != n)
    return Err("{}: '{}' must be an array of {} per-layer values (it says which layers are Mamba, attention or MLP)",
               path, key, n);
  std::vector<int> out;
  for (const GgufValue& e : v->array) {
    auto i = e.AsInt();
    if (!i || *i < 0 || *i > (1 << 24)) return Err("{}: '{}' holds a value that is not a size", path, key);
    out.push_back(static_cast<int>(*i));
  }
  return out;
}

// The one nonzero value of a per-layer array (every attention layer has the same KV heads, every MLP the same width).
Result<int> UniformNonzero(const std::vector<int>& v, const std::string& key, const std::string& path) {
  int value = 0;
  for (int x : v) {
    if (x == 0) continue;
    if (value != 0 && x != value)
      return Err("{}: '{}' gives layers different sizes ({} and {}); parallm supports one", path, key, value, x);
    value = x;
  }
  return value;
}

// llama.cpp's nemotron_h / nemotron_h_moe (convert_hf_to_gguf.py's NemotronHModel, llama_model_nemotron_h): no key
// names the layer kinds; a layer is Mamba-2 when its head_count_kv and feed_forward_length are both 0, attention
// when only feed_forward_length is, else an MLP (nemotron_h) or experts (nemotron_h_moe). The Mamba-2 shape is
// ssm.{conv_kernel, state_size, group_count, inner_size} and ssm.time_step_rank, which holds the head count. llama.cpp
// does not clamp dt (transformers clamps at time_step_min, which GGUF does not carry): dt_min 0. Routing is sigmoid
// with the correction bias (exp_probs_b), expert_weights_norm/scale and expert_group_count/used_count.
Status ReadGgufNemotronH(const GgufFile& file, const std::string& p, const std::string& path, ModelConfig& c) {
  auto get = [&](const char* key, std::optional<int64_t> def) -> Result<int> {
    auto v = file.GetInt(p + key);
    if (!v) {
      if (def) return static_cast<int>(*def);
      return Err("{}: missing metadata key '{}{}'", path, p, key);
    }
    if (*v < 0 || *v > (int64_t{1} << 30)) return Err("{}: metadata '{}{}' = {} is out of range", path, p, key, *v);
    return static_cast<int>(*v);
  };
  PARALLM_ASSIGN_OR_RETURN(std::vector<int> ffn, LayerArray(file, p + "feed_forward_length", c.n_layers, path));
  PARALLM_ASSIGN_OR_RETURN(std::vector<int> kv, LayerArray(file, p + "attention.head_count_kv", c.n_layers, path));
  // Newer converters append the multi-token-prediction head as extra blocks (nextn_predict_layers); parallm runs the
  // trunk and leaves the head's tensors unread.
  if (const int64_t nextn = file.GetInt(p + "nextn_predict_layers").value_or(0); nextn > 0) {
    if (nextn >= c.n_layers) return Err("{}: '{}nextn_predict_layers' = {} leaves no layer", path, p, nextn);
    c.n_layers -= static_cast<int>(nextn);
    ffn.resize(static_cast<size_t>(c.n_layers));
    kv.resize(static_cast<size_t>(c.n_layers));
  }
  PARALLM_ASSIGN_OR_RETURN(c.n_experts, get("expert_count", 0));
  const bool experts = c.n_experts > 0;
  c.layer_pattern.clear();
  for (int l = 0; l < c.n_layers; ++l) {
    const size_t i = static_cast<size_t>(l);
    c.layer_pattern += kv[i] == 0 && ffn[i] == 0 ? 'M' : ffn[i] == 0 ? '*' : experts ? 'E' : '-';
  }
  PARALLM_ASSIGN_OR_RETURN(const int ffn_width, UniformNonzero(ffn, p + "feed_forward_length", path));
  PARALLM_ASSIGN_OR_RETURN(c.n_kv_heads, UniformNonzero(kv, p + "attention.head_count_kv", path));
  if (c.n_kv_heads == 0) c.n_kv_heads = c.n_heads;  // no attention layer: unused, but the config wants a value
  PARALLM_ASSIGN_OR_RETURN(c.ssm_conv_kernel, get("ssm.conv_kernel", std::nullopt));
  PARALLM_ASSIGN_OR_RETURN(c.ssm_state, get("ssm.state_size", std::nullopt));
  PARALLM_ASSIGN_OR_RETURN(c.ssm_groups, get("ssm.group_count", std::nullopt));
  PARALLM_ASSIGN_OR_RETURN(c.ssm_heads, get("ssm.time_step_rank", std::nullopt));
  PARALLM_ASSIGN_OR_RETURN(const int inner, get("ssm.inner_size", std::nullopt));
  if (c.ssm_heads <= 0 || inner % c.ssm_heads != 0)
    return Err("{}: '{}ssm.inner_size' {} is not a multiple of the {} Mamba heads ('{}ssm.time_step_rank')", path, p,
               inner, c.ssm_heads, p);
  c.ssm_head_dim = inner / c.ssm_heads;
  c.ssm_dt_min = 0.0f;
  c.activation = Activation::kRelu2;
  if (!experts) {
    c.ffn = ffn_width > 0 ? ffn_width : c.hidden;  // no MLP layer: unused
    c.n_experts = 0;
    return Status::Ok();
  }
  if (file.GetInt(p + "moe_latent_size").value_or(0) > 0)
    return Err("{}: '{}moe_latent_size' (latent expert projections) is not supported", path, p);
  if (auto shared = file.GetInt(p + "expert_shared_count"); shared && *shared != 1)
    return Err("{}: '{}expert_shared_count' = {} is not supported for nemotron_h (expected 1)", path, p, *shared);
  PARALLM_ASSIGN_OR_RETURN(c.n_experts_used, get("expert_used_count", std::nullopt));
  PARALLM_ASSIGN_OR_RETURN(c.expert_ffn, get("expert_feed_forward_length", ffn_width));
  PARALLM_ASSIGN_OR_RETURN(c.shared_expert_ffn, get("expert_shared_feed_forward_length", std::nullopt));
  c.ffn = c.expert_ffn;  // no dense MLP layer in a nemotron_h_moe file
  c.norm_topk_prob = file.GetInt(p + "expert_weights_norm").value_or(0) != 0;
  const double scale = file.GetFloat(p + "expert_weights_scale").value_or(0.0);
  c.routed_scaling = scale != 0.0 ? static_cast<float>(scale) : 1.0f;  // llama.cpp: 0 (absent) scales by nothing
  PARALLM_ASSIGN_OR_RETURN(c.moe_groups, get("expert_group_count", 1));
  if (c.moe_groups == 0) c.moe_groups = 1;
  PARALLM_ASSIGN_OR_RETURN(c.moe_topk_groups, get("expert_group_used_count", c.moe_groups > 1 ? std::nullopt
                                                                                             : std::optional<int64_t>(1)));
  return Status::Ok();
}

// The keys ReadGgufNemotronH reads, as convert_hf_to_gguf.py writes them (per-layer arrays as int32).
void WriteGgufNemotronH(const ModelConfig& c, const std::string& p, GgufWriter& w) {
  const bool experts = c.layer_pattern.find('E') != std::string::npos;
  std::vector<int32_t> ffn, kv;
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerKind k = c.KindOf(l);
    ffn.push_back(k == LayerKind::kMlp ? c.ffn : k == LayerKind::kMoe ? c.expert_ffn : 0);
    kv.push_back(k == LayerKind::kAttention ? c.n_kv_heads : 0);
  }
  w.Set(p + "feed_forward_length", GgufValue::I32Array(ffn));
  w.Set(p + "attention.head_count_kv", GgufValue::I32Array(kv));
  w.Set(p + "ssm.conv_kernel", GgufValue::U32(static_cast<uint32_t>(c.ssm_conv_kernel)));
  w.Set(p + "ssm.state_size", GgufValue::U32(static_cast<uint32_t>(c.ssm_state)));
  w.Set(p + "ssm.group_count", GgufValue::U32(static_cast<uint32_t>(c.ssm_groups)));
  w.Set(p + "ssm.inner_size", GgufValue::U32(static_cast<uint32_t>(c.ssm_inner())));
  w.Set(p + "ssm.time_step_rank", GgufValue::U32(static_cast<uint32_t>(c.ssm_heads)));
  w.Set(p + "rope.scaling.finetuned", GgufValue::Bool(false));
  if (!experts) return;
  w.Set(p + "expert_used_count", GgufValue::U32(static_cast<uint32_t>(c.n_experts_used)));
  w.Set(p + "expert_feed_forward_length", GgufValue::U32(static_cast<uint32_t>(c.expert_ffn)));
  w.Set(p + "expert_shared_feed_forward_length", GgufValue::U32(static_cast<uint32_t>(c.shared_expert_ffn)));
  w.Set(p + "expert_count", GgufValue::U32(static_cast<uint32_t>(c.n_experts)));
  w.Set(p + "expert_shared_count", GgufValue::U32(1));
  w.Set(p + "expert_weights_norm", GgufValue::Bool(c.norm_topk_prob));
  w.Set(p + "expert_weights_scale", GgufValue::F32(c.routed_scaling));
  w.Set(p + "expert_group_count", GgufValue::U32(static_cast<uint32_t>(c.moe_groups)));
  // The converter leaves the kept-group count out (Nemotron-3-Nano has one group); llama.cpp reads it when groups > 1.
  if (c.moe_groups > 1) w.Set(p + "expert_group_used_count", GgufValue::U32(static_cast<uint32_t>(c.moe_topk_groups)));
}

}  // namespace

Status ReadGgufExtras(const GgufFile& file, const ArchSpec& spec, const std::string& path, ModelConfig& c) {
  // The file's own architecture names its keys (nemotron_h_moe files are NemotronHSpec's too).
  const std::string p = file.GetString("general.architecture").value_or(std::string(spec.gguf_architecture)) + ".";
  auto get_float = [&](const std::string& key) { return file.GetFloat(p + key); };
  auto get_int = [&](const std::string& key) { return file.GetInt(p + key); };
  ApplySpec(spec, c);
  if (spec.arch == Arch::kNemotronH) return ReadGgufNemotronH(file, p, path, c);
  if (auto w = get_int("attention.sliding_window"); w && *w > 0) c.sliding_window = static_cast<int>(*w);
  if (spec.moe) {
    // llama.cpp's keys; Mixtral's experts have feed_forward_length (it has no dense layers). A layer without a
    // router (ffn_gate_inp) is dense: llama.cpp's own files have none, but such a file says what it holds.
    auto count = [&](const char* key) { return static_cast<int>(get_int(key).value_or(0)); };
    c.n_experts = count("expert_count");
    c.n_experts_used = count("expert_used_count");
    c.expert_ffn = get_int("expert_feed_forward_length") ? count("expert_feed_forward_length") : c.ffn;
    c.shared_expert_ffn = count("expert_shared_feed_forward_length");
    if (auto b = file.GetInt(p + "expert_weights_norm")) c.norm_topk_prob = *b != 0;
    for (int l = 0; l < c.n_layers; ++l)
      if (file.tensors().Find(fmt::format("blk.{}.ffn_gate_inp.weight", l)) == nullptr) c.mlp_only_layers.push_back(l);
  }
  if (IsGemma(spec)) {
    c.query_pre_attn_scalar = GgufQueryPreAttnScalar(c);
    c.attn_softcap = static_cast<float>(get_float("attn_logit_softcapping").value_or(0));
    c.final_softcap = static_cast<float>(get_float("final_logit_softcapping").value_or(0));
  }
  if (spec.arch == Arch::kGemma3) {
    c.rope_local_theta = static_cast<float>(get_float("rope.freq_base_swa").value_or(10000.0));
  }
  auto scaling = file.GetString(p + "rope.scaling.type");
  if (scaling && *scaling == "linear") {
    c.rope_linear_factor = static_cast<float>(get_float("rope.scaling.factor").value_or(1.0));
    if (!(c.rope_linear_factor > 0)) return Err("{}: '{}rope.scaling.factor' must be positive", path, p);
  } else if (scaling && *scaling != "none") {
    return Err("{}: '{}rope.scaling.type' = '{}' is not supported (linear is; Llama-3 scaling comes as "
               "rope_freqs.weight)", path, p, *scaling);
  }
  if (auto rot = get_int("rope.dimension_count"); rot && *rot != c.head_dim) c.rotary_dim = static_cast<int>(*rot);
  if (spec.arch == Arch::kPhi3 && file.tensors().Find("rope_factors_long.weight") != nullptr) {
    ModelConfig::LongRope r;
    PARALLM_ASSIGN_OR_RETURN(r.long_factors, ReadFactorTensor(file, "rope_factors_long.weight", path));
    PARALLM_ASSIGN_OR_RETURN(r.short_factors, ReadFactorTensor(file, "rope_factors_short.weight", path));
    auto orig = get_int("rope.scaling.original_context_length");
    if (!orig || *orig <= 0) return Err("{}: LongRoPE needs '{}rope.scaling.original_context_length'", path, p);
    r.original_max_position = static_cast<int>(*orig);
    r.attn_factor = static_cast<float>(
        get_float("rope.scaling.attn_factor").value_or(LongRopeAttnFactor(c.context_length, r.original_max_position)));
    c.rope_longrope = std::move(r);
  }
  return Status::Ok();
}

void WriteGgufExtras(const ModelConfig& c, const ArchSpec& spec, GgufWriter& w) {
  const std::string p = GgufArchitectureFor(c) + ".";
  w.Set(p + "rope.dimension_count", GgufValue::U32(static_cast<uint32_t>(c.rotary())));
  if (c.hybrid()) return WriteGgufNemotronH(c, p, w);
  if (spec.arch == Arch::kPhi3 || c.sliding_window > 0)
    w.Set(p + "attention.sliding_window", GgufValue::U32(static_cast<uint32_t>(c.sliding_window)));
  if (c.n_experts > 0) {
    w.Set(p + "expert_count", GgufValue::U32(static_cast<uint32_t>(c.n_experts)));
    w.Set(p + "expert_used_count", GgufValue::U32(static_cast<uint32_t>(c.n_experts_used)));
    if (spec.arch != Arch::kMixtral)
      w.Set(p + "expert_feed_forward_length", GgufValue::U32(static_cast<uint32_t>(c.expert_ffn)));
    if (c.shared_expert_ffn > 0)
      w.Set(p + "expert_shared_feed_forward_length", GgufValue::U32(static_cast<uint32_t>(c.shared_expert_ffn)));
    if (c.norm_topk_prob != spec.default_norm_topk_prob)
      w.Set(p + "expert_weights_norm", GgufValue::Bool(c.norm_topk_prob));
  }
  if (IsGemma(spec)) {
    if (c.attn_softcap > 0) w.Set(p + "attn_logit_softcapping", GgufValue::F32(c.attn_softcap));
    if (c.final_softcap > 0) w.Set(p + "final_logit_softcapping", GgufValue::F32(c.final_softcap));
  }
  if (spec.arch == Arch::kGemma3 && c.rope_local_theta > 0)
    w.Set(p + "rope.freq_base_swa", GgufValue::F32(c.rope_local_theta));
  if (c.rope_linear_factor != 1.0f) {
    w.Set(p + "rope.scaling.type", GgufValue::String("linear"));
    w.Set(p + "rope.scaling.factor", GgufValue::F32(c.rope_linear_factor));
  }
  if (c.rope_longrope) {
    w.Set(p + "rope.scaling.original_context_length", GgufValue::U32(static_cast<uint32_t>(c.rope_longrope->original_max_position)));
    w.Set(p + "rope.scaling.attn_factor", GgufValue::F32(c.rope_longrope->attn_factor));
  }
}

namespace {

// transformers' Qwen2MoeConfig / Qwen3MoeConfig (num_experts, moe_intermediate_size, shared_expert_intermediate_size,
// norm_topk_prob, decoder_sparse_step, mlp_only_layers) and MixtralConfig (num_local_experts; its experts have
// intermediate_size; every layer sparse; always renormalised).
Status ReadHfMoe(const boost::json::object& cfg, const ArchSpec& spec, const std::string& path, ModelConfig& c) {
  const bool mixtral = spec.arch == Arch::kMixtral;
  auto positive = [&](const char* key, std::optional<double> def) -> Result<int> {
    auto v = Number(cfg, key);
    if (!v) v = def;
    if (!v || *v != std::floor(*v) || *v < 1 || *v > (1 << 24))
      return Err("{}: '{}' must be a positive integer for {}", path, key, spec.name);
    return static_cast<int>(*v);
  };
  PARALLM_ASSIGN_OR_RETURN(c.n_experts, positive(mixtral ? "num_local_experts" : "num_experts", std::nullopt));
  PARALLM_ASSIGN_OR_RETURN(c.n_experts_used, positive("num_experts_per_tok", std::nullopt));
  if (mixtral) {
    c.expert_ffn = c.ffn;
    return Status::Ok();
  }
  PARALLM_ASSIGN_OR_RETURN(c.expert_ffn, positive("moe_intermediate_size", std::nullopt));
  if (spec.shared_expert) {
    PARALLM_ASSIGN_OR_RETURN(c.shared_expert_ffn, positive("shared_expert_intermediate_size", std::nullopt));
  }
  c.norm_topk_prob = Bool(cfg, "norm_topk_prob").value_or(false);  // the configs' class default
  PARALLM_ASSIGN_OR_RETURN(c.decoder_sparse_step, positive("decoder_sparse_step", 1.0));
  if (auto it = cfg.find("mlp_only_layers"); it != cfg.end() && !it->value().is_null()) {
    if (!it->value().is_array()) return Err("{}: 'mlp_only_layers' must be a list of layer indices", path);
    for (const boost::json::value& v : it->value().as_array()) {
      if (!v.is_int64() || v.as_int64() < 0 || v.as_int64() >= c.n_layers)
        return Err("{}: 'mlp_only_layers' must hold layer indices below {}", path, c.n_layers);
      c.mlp_only_layers.push_back(static_cast<int>(v.as_int64()));
    }
  }
  return Status::Ok();
}

// transformers' NemotronHConfig: the layer pattern (hybrid_override_pattern, or the newer layers_block_type list), the
// Mamba-2 mixer (mamba_num_heads, mamba_head_dim, ssm_state_size, n_groups, conv_kernel, time_step_min, with the
// older mamba_* spellings), the relu2 MLP and the sigmoid-routed experts. What parallm cannot run is refused by name.
Status ReadHfNemotronH(const boost::json::object& cfg, const std::string& path, ModelConfig& c) {
  auto positive = [&](std::initializer_list<const char*> keys, std::optional<double> def) -> Result<int> {
    std::optional<double> v;
    const char* name = *keys.begin();
    for (const char* key : keys)
      if (!v) v = Number(cfg, key);
    if (!v) v = def;
    if (!v || *v != std::floor(*v) || *v < 1 || *v > (1 << 24))
      return Err("{}: '{}' must be a positive integer for nemotron_h", path, name);
    return static_cast<int>(*v);
  };
  if (auto p = String(cfg, "hybrid_override_pattern")) {
    c.layer_pattern = *p;
  } else {
    for (const char* key : {"layers_block_type", "layer_types"}) {
      auto it = cfg.find(key);
      if (it == cfg.end() || !it->value().is_array()) continue;
      for (const boost::json::value& v : it->value().as_array()) {
        const std::string t = v.is_string() ? std::string(v.as_string()) : "";
        if (t == "mamba" || t == "linear_attention") c.layer_pattern += 'M';
        else if (t == "attention" || t == "full_attention") c.layer_pattern += '*';
        else if (t == "mlp") c.layer_pattern += '-';
        else if (t == "moe") c.layer_pattern += 'E';
        else return Err("{}: '{}' holds '{}'; expected mamba, attention, mlp or moe layers", path, key, t);
      }
      break;
    }
  }
  if (c.layer_pattern.empty()) return Err("{}: nemotron_h needs 'hybrid_override_pattern' (or 'layers_block_type')", path);
  if (static_cast<int>(c.layer_pattern.size()) != c.n_layers)
    return Err("{}: 'hybrid_override_pattern' has {} layers, num_hidden_layers says {}", path, c.layer_pattern.size(),
               c.n_layers);
  for (char k : c.layer_pattern)
    if (k != 'M' && k != '*' && k != '-' && k != 'E')
      return Err("{}: 'hybrid_override_pattern' holds '{}'; expected M (Mamba-2), * (attention), - (MLP), E (experts)",
                 path, k);
  if (auto act = String(cfg, "mlp_hidden_act"); act && *act != "relu2")
    return Err("{}: 'mlp_hidden_act' = '{}' is not supported for nemotron_h (expected relu2)", path, *act);
  if (auto act = String(cfg, "mamba_hidden_act"); act && *act != "silu" && *act != "swish")
    return Err("{}: 'mamba_hidden_act' = '{}' is not supported for nemotron_h (expected silu)", path, *act);
  for (const char* key : {"attention_bias", "mlp_bias", "use_bias", "mamba_proj_bias"})
    if (Bool(cfg, key).value_or(false)) return Err("{}: '{}' = true is not supported for nemotron_h", path, key);
  if (auto it = cfg.find("moe_latent_size"); it != cfg.end() && !it->value().is_null())
    return Err("{}: 'moe_latent_size' (latent expert projections) is not supported for nemotron_h", path);
  c.activation = Activation::kRelu2;
  c.rms_eps = static_cast<float>(Number(cfg, "layer_norm_epsilon").value_or(1e-5));
  PARALLM_ASSIGN_OR_RETURN(c.ssm_heads, positive({"mamba_num_heads"}, std::nullopt));
  PARALLM_ASSIGN_OR_RETURN(c.ssm_head_dim, positive({"mamba_head_dim"}, std::nullopt));
  PARALLM_ASSIGN_OR_RETURN(c.ssm_state, positive({"ssm_state_size"}, 128.0));
  PARALLM_ASSIGN_OR_RETURN(c.ssm_groups, positive({"n_groups", "mamba_n_groups"}, 8.0));
  PARALLM_ASSIGN_OR_RETURN(c.ssm_conv_kernel, positive({"conv_kernel", "mamba_d_conv"}, 4.0));
  PARALLM_ASSIGN_OR_RETURN(c.ssm_chunk, positive({"chunk_size", "mamba_chunk_size"}, 128.0));
  c.ssm_dt_min = static_cast<float>(Number(cfg, "time_step_min").value_or(Number(cfg, "mamba_dt_min").value_or(0.001)));
  if (c.layer_pattern.find('E') != std::string::npos) {
    PARALLM_ASSIGN_OR_RETURN(c.n_experts, positive({"n_routed_experts"}, std::nullopt));
    PARALLM_ASSIGN_OR_RETURN(c.n_experts_used, positive({"num_experts_per_tok"}, std::nullopt));
    PARALLM_ASSIGN_OR_RETURN(c.expert_ffn, positive({"moe_intermediate_size"}, std::nullopt));
    PARALLM_ASSIGN_OR_RETURN(c.shared_expert_ffn, positive({"moe_shared_expert_intermediate_size"}, std::nullopt));
    PARALLM_ASSIGN_OR_RETURN(c.moe_groups, positive({"n_group"}, 1.0));
    PARALLM_ASSIGN_OR_RETURN(c.moe_topk_groups, positive({"topk_group"}, 1.0));
    if (auto shared = Number(cfg, "n_shared_experts"); shared && *shared != 1)
      return Err("{}: 'n_shared_experts' = {} is not supported for nemotron_h (expected 1)", path, *shared);
    c.norm_topk_prob = Bool(cfg, "norm_topk_prob").value_or(true);
    c.routed_scaling = static_cast<float>(Number(cfg, "routed_scaling_factor").value_or(1.0));
  }
  return Status::Ok();
}

void WriteHfNemotronH(const ModelConfig& c, boost::json::object& cfg) {
  cfg.erase("hidden_act");
  cfg.erase("rope_theta");
  cfg["hybrid_override_pattern"] = c.layer_pattern;
  cfg["mlp_hidden_act"] = "relu2";
  cfg["mamba_hidden_act"] = "silu";
  cfg["layer_norm_epsilon"] = c.rms_eps;
  cfg["mamba_num_heads"] = c.ssm_heads;
  cfg["mamba_head_dim"] = c.ssm_head_dim;
  cfg["ssm_state_size"] = c.ssm_state;
  cfg["n_groups"] = c.ssm_groups;
  cfg["conv_kernel"] = c.ssm_conv_kernel;
  cfg["chunk_size"] = c.ssm_chunk;
  cfg["time_step_min"] = c.ssm_dt_min;
  cfg["use_conv_bias"] = true;
  cfg["use_bias"] = false;
  cfg["mlp_bias"] = false;
  if (c.n_experts > 0) {
    cfg["n_routed_experts"] = c.n_experts;
    cfg["num_experts_per_tok"] = c.n_experts_used;
    cfg["moe_intermediate_size"] = c.expert_ffn;
    cfg["moe_shared_expert_intermediate_size"] = c.shared_expert_ffn;
    cfg["n_shared_experts"] = 1;
    cfg["n_group"] = c.moe_groups;
    cfg["topk_group"] = c.moe_topk_groups;
    cfg["norm_topk_prob"] = c.norm_topk_prob;
    cfg["routed_scaling_factor"] = c.routed_scaling;
    cfg["moe_latent_size"] = nullptr;
  }
}

}  // namespace

Status ReadHfExtras(const boost::json::object& cfg, const ArchSpec& spec, const std::string& path, ModelConfig& c) {
  ApplySpec(spec, c);
  if (spec.arch == Arch::kNemotronH) return ReadHfNemotronH(cfg, path, c);
  // The activation: SiLU for every family but Gemma's GeGLU; anything else would be a silently wrong model.
  for (const char* key : {"hidden_activation", "hidden_act"}) {
    auto act = String(cfg, key);
    if (!act) continue;
    const bool gelu_tanh = *act == "gelu_pytorch_tanh" || *act == "gelu_tanh" || *act == "gelu_new";
    // Gemma 1's config.json says "gelu" in hidden_act but its reference code runs the tanh approximation.
    if (IsGemma(spec) && (gelu_tanh || (*act == "gelu" && std::string_view(key) == "hidden_act"))) break;
    if (!IsGemma(spec) && (*act == "silu" || *act == "swish")) break;
    return Err("{}: '{}' = '{}' is not supported for {} (expected {})", path, key, *act, spec.name,
               IsGemma(spec) ? "gelu_pytorch_tanh" : "silu");
  }
  if (spec.moe) PARALLM_RETURN_IF_ERROR(ReadHfMoe(cfg, spec, path, c));
  if (auto w = Number(cfg, "sliding_window"); w && *w > 0) c.sliding_window = static_cast<int>(*w);
  if (auto use = cfg.find("use_sliding_window"); use != cfg.end() && use->value().is_bool() && !use->value().as_bool())
    c.sliding_window = 0;  // Qwen2-style switch
  if (IsGemma(spec)) {
    c.query_pre_attn_scalar = static_cast<float>(Number(cfg, "query_pre_attn_scalar").value_or(c.head_dim));
    c.attn_softcap = static_cast<float>(Number(cfg, "attn_logit_softcapping").value_or(0));
    c.final_softcap = static_cast<float>(Number(cfg, "final_logit_softcapping").value_or(0));
  }
  if (spec.arch == Arch::kGemma3) {
    c.rope_local_theta = static_cast<float>(Number(cfg, "rope_local_base_freq").value_or(10000.0));
    if (auto pattern = Number(cfg, "sliding_window_pattern")) c.sliding_pattern = static_cast<int>(*pattern);
    if (auto it = cfg.find("layer_types"); it != cfg.end() && it->value().is_array()) {
      // Newer configs list each layer's kind; parallm runs the periodic pattern, so the list must follow it.
      const auto& types = it->value().as_array();
      if (static_cast<int>(types.size()) != c.n_layers)
        return Err("{}: 'layer_types' has {} entries for {} layers", path, types.size(), c.n_layers);
      for (int l = 0; l < c.n_layers; ++l) {
        const auto& t = types[static_cast<size_t>(l)];
        const bool sliding = t.is_string() && t.as_string() == "sliding_attention";
        if (!sliding && !(t.is_string() && t.as_string() == "full_attention"))
          return Err("{}: 'layer_types'[{}] must be \"sliding_attention\" or \"full_attention\"", path, l);
        if (sliding != ((l + 1) % c.sliding_pattern != 0))
          return Err("{}: 'layer_types' does not follow sliding_window_pattern {} (layer {}); other layouts are not "
                     "supported", path, c.sliding_pattern, l);
      }
    }
  }
  if (auto rd = Number(cfg, "partial_rotary_factor"); rd && *rd != 1.0) {
    c.rotary_dim = static_cast<int>(c.head_dim * *rd);
  }
  auto it = cfg.find("rope_scaling");
  if (it == cfg.end() || !it->value().is_object()) return Status::Ok();
  const boost::json::object& rs = it->value().as_object();
  std::string type;
  for (const char* key : {"rope_type", "type"})
    if (auto t = String(rs, key)) type = *t;
  if (type == "linear") {
    c.rope_linear_factor = static_cast<float>(Number(rs, "factor").value_or(1.0));
    if (!(c.rope_linear_factor > 0)) return Err("{}: rope_scaling 'factor' must be positive", path);
  } else if (type == "longrope" || type == "su") {
    ModelConfig::LongRope r;
    const std::string where = path + " rope_scaling";
    PARALLM_ASSIGN_OR_RETURN(r.short_factors, FloatArray(rs, "short_factor", where));
    PARALLM_ASSIGN_OR_RETURN(r.long_factors, FloatArray(rs, "long_factor", where));
    auto orig = Number(cfg, "original_max_position_embeddings");
    r.original_max_position = orig ? static_cast<int>(*orig) : c.context_length;
    r.attn_factor = static_cast<float>(
        Number(rs, "attention_factor").value_or(LongRopeAttnFactor(c.context_length, r.original_max_position)));
    c.rope_longrope = std::move(r);
  }
  // Other types (llama3, default) are the loader's.
  return Status::Ok();
}

void WriteHfExtras(const ModelConfig& c, const ArchSpec& spec, boost::json::object& cfg) {
  if (spec.arch == Arch::kNemotronH) return WriteHfNemotronH(c, cfg);
  if (spec.moe) {
    cfg["num_experts_per_tok"] = c.n_experts_used;
    if (spec.arch == Arch::kMixtral) {
      cfg["num_local_experts"] = c.n_experts;
    } else {
      cfg["num_experts"] = c.n_experts;
      cfg["moe_intermediate_size"] = c.expert_ffn;
      cfg["norm_topk_prob"] = c.norm_topk_prob;
      cfg["decoder_sparse_step"] = c.decoder_sparse_step;
      boost::json::array only;
      for (int l : c.mlp_only_layers) only.emplace_back(l);
      cfg["mlp_only_layers"] = only;
      if (spec.shared_expert) cfg["shared_expert_intermediate_size"] = c.shared_expert_ffn;
    }
  }
  if (IsGemma(spec)) {
    cfg.erase("hidden_act");
    cfg["hidden_activation"] = "gelu_pytorch_tanh";
    cfg["query_pre_attn_scalar"] = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : c.head_dim;
    if (spec.arch != Arch::kGemma) {
      cfg["attn_logit_softcapping"] = c.attn_softcap > 0 ? boost::json::value(c.attn_softcap) : nullptr;
      cfg["final_logit_softcapping"] = c.final_softcap > 0 ? boost::json::value(c.final_softcap) : nullptr;
    }
  }
  if (spec.arch == Arch::kGemma2 || spec.arch == Arch::kGemma3 || spec.arch == Arch::kPhi3 || c.sliding_window > 0)
    cfg["sliding_window"] = c.sliding_window > 0 ? boost::json::value(c.sliding_window) : nullptr;
  if (spec.arch == Arch::kGemma3) {
    cfg["sliding_window_pattern"] = c.sliding_pattern;
    boost::json::array types;
    for (int l = 0; l < c.n_layers; ++l) types.emplace_back(c.LayerIsSliding(l) ? "sliding_attention" : "full_attention");
    cfg["layer_types"] = types;
    cfg["rope_local_base_freq"] = c.rope_local_theta > 0 ? c.rope_local_theta : c.rope_theta;
  }
  if (c.rotary_dim > 0 && c.rotary_dim != c.head_dim)
    cfg["partial_rotary_factor"] = static_cast<double>(c.rotary_dim) / c.head_dim;
  if (c.rope_linear_factor != 1.0f) cfg["rope_scaling"] = boost::json::object{{"rope_type", "linear"}, {"factor", c.rope_linear_factor}};
  if (c.rope_longrope) {
    cfg["rope_scaling"] = boost::json::object{{"type", "longrope"},
                                              {"short_factor", ToJson(c.rope_longrope->short_factors)},
                                              {"long_factor", ToJson(c.rope_longrope->long_factors)}};
    cfg["original_max_position_embeddings"] = c.rope_longrope->original_max_position;
  }
}

Status ValidateExtras(const ModelConfig& c, const std::string& path) {
  const int rot = c.rotary();
  if (rot <= 0 || rot > c.head_dim || rot % 2 != 0)
    return Err("{}: {} rotary dimensions for head dimension {}; expected an even number up to it", path, rot, c.head_dim);
  if (c.rope_longrope) {
    const auto& r = *c.rope_longrope;
    const size_t want = static_cast<size_t>(rot / 2);
    if (r.short_factors.size() != want || r.long_factors.size() != want)
      return Err("{}: LongRoPE has {} short and {} long factors, expected rotary_dim / 2 = {}", path,
                 r.short_factors.size(), r.long_factors.size(), want);
    if (r.original_max_position <= 0) return Err("{}: LongRoPE original_max_position_embeddings must be positive", path);
    for (const std::vector<float>* v : {&r.short_factors, &r.long_factors})
      for (float f : *v)
        if (!(f > 0)) return Err("{}: LongRoPE factors must be positive", path);
  }
  if (c.sliding_window < 0) return Err("{}: sliding window {} is negative", path, c.sliding_window);
  if (c.sliding_pattern < 1) return Err("{}: sliding window pattern {} must be >= 1", path, c.sliding_pattern);
  if (!(c.attn_softcap >= 0) || !(c.final_softcap >= 0)) return Err("{}: soft-capping values must be >= 0", path);
  if (!c.rope_freq_factors.empty() && c.rotary_dim > 0 && c.rotary_dim != c.head_dim)
    return Err("{}: rope_freqs with partial rotary embeddings is not supported", path);
  if (c.hybrid()) {
    if (static_cast<int>(c.layer_pattern.size()) != c.n_layers ||
        c.layer_pattern.find_first_not_of("M*-E") != std::string::npos)
      return Err("{}: layer pattern '{}' must give each of the {} layers as M, *, - or E", path, c.layer_pattern,
                 c.n_layers);
    if (c.ssm_heads <= 0 || c.ssm_head_dim <= 0 || c.ssm_state <= 0 || c.ssm_groups <= 0 || c.ssm_conv_kernel <= 0)
      return Err("{}: the Mamba-2 shape (heads {}, head dim {}, state {}, groups {}, conv {}) must be positive", path,
                 c.ssm_heads, c.ssm_head_dim, c.ssm_state, c.ssm_groups, c.ssm_conv_kernel);
    if (c.ssm_heads % c.ssm_groups != 0)
      return Err("{}: {} Mamba heads are not a multiple of {} groups", path, c.ssm_heads, c.ssm_groups);
    if (c.n_experts > 0 && (c.moe_groups <= 0 || c.n_experts % c.moe_groups != 0 || c.moe_topk_groups < 1 ||
                            c.moe_topk_groups > c.moe_groups ||
                            c.moe_topk_groups * (c.n_experts / c.moe_groups) < c.n_experts_used))
      return Err("{}: expert groups {} (top {}) do not fit {} experts top-{}", path, c.moe_groups, c.moe_topk_groups,
                 c.n_experts, c.n_experts_used);
  }
  if (c.n_experts > 0) {
    if (c.n_experts_used < 1 || c.n_experts_used > c.n_experts)
      return Err("{}: {} experts per token out of {}; expected 1 to {}", path, c.n_experts_used, c.n_experts, c.n_experts);
    if (c.expert_ffn <= 0) return Err("{}: the experts' feed-forward size is {}, expected a positive number", path, c.expert_ffn);
    if (c.shared_expert_ffn < 0) return Err("{}: shared expert size {} is negative", path, c.shared_expert_ffn);
  } else if (c.n_experts < 0) {
    return Err("{}: expert count {} is negative", path, c.n_experts);
  }
  return Status::Ok();
}

}  // namespace parallm
