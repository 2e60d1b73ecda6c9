// LoRA adapter loading: mlx-lm, PEFT and GGUF files into one LoraAdapter, with each format's scale convention
// and tensor layout (mlx-lm tuner/lora.py, peft LoraLayer, llama.cpp convert_lora_to_gguf.py / llama-adapter.cpp).
#include "model/lora.h"

#include <atomic>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <regex>
#include <set>

#include <boost/json.hpp>
#include <fmt/format.h>

#include "formats/gguf.h"
#include "formats/hf_folder.h"
#include "formats/safetensors.h"
#include "model/arch/arch.h"
#include "model/model_writer.h"
#include "tensor/quant.h"
#include "util/mapped_file.h"
#include "util/strings.h"

namespace parallm {
namespace {

constexpr std::array<LoraTarget, kNumLoraTargets> kTargets = {LoraTarget::kQ,    LoraTarget::kK,  LoraTarget::kV,
                                                                LoraTarget::kO,    LoraTarget::kGate, LoraTarget::kUp,
                                                                LoraTarget::kDown};

std::optional<LoraTarget> TargetByHfName(std::string_view short_name) {
  for (LoraTarget t : kTargets)
    if (short_name == LoraTargetHfName(t)) return t;
  return std::nullopt;
}

std::optional<LoraTarget> TargetByGgufName(std::string_view name) {
  for (LoraTarget t : kTargets)
    if (name == LoraTargetGgufName(t)) return t;
  return std::nullopt;
}

// The values of a stored tensor as f32 (float types and GGML blocks).
Result<std::vector<float>> ToF32(const TensorView& v, const std::string& what) {
  std::vector<float> out(static_cast<size_t>(v.NumElements()));
  const int64_t cols = v.shape.empty() ? 1 : v.shape.back();
  if (cols <= 0 || v.NumElements() % cols != 0) return Err("{}: empty tensor", what);
  if (RowBytes(v.dtype, cols) * static_cast<size_t>(v.NumElements() / cols) != v.nbytes)
    return Err("{}: {} values of type {} do not fill its {} bytes", what, v.NumElements(), Name(v.dtype), v.nbytes);
  for (int64_t r = 0; r < v.NumElements() / cols; ++r)
    DequantizeRow(v.dtype, v.data + static_cast<size_t>(r) * RowBytes(v.dtype, cols), out.data() + r * cols, cols);
  return out;
}

// Parses "<prefix>N.<rest>".
bool ParseLayerName(std::string_view name, std::string_view prefix, int* layer, std::string_view* rest) {
  if (!StartsWith(name, prefix)) return false;
  name.remove_prefix(prefix.size());
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), *layer);
  if (ec != std::errc() || ptr == name.data() + name.size() || *ptr != '.') return false;
  *rest = std::string_view(ptr + 1, static_cast<size_t>(name.data() + name.size() - ptr - 1));
  return true;
}

// Collects the A and B halves of each (layer, target) and checks them against the base model.
class Builder {
 public:
  Builder(const ModelConfig& base, std::string path, LoraFormat format) : c_(base) {
    adapter_ = std::make_shared<LoraAdapter>();
    adapter_->path = std::move(path);
    adapter_->format = format;
    adapter_->layers.resize(static_cast<size_t>(base.n_layers));
  }

  // `a` is [rank, in], `b` is [out, rank] (already in PEFT's layout); `rope` is the pairing of b's rows for q/k.
  Status Add(const std::string& tensor, int layer, LoraTarget t, std::vector<int64_t> a_shape, std::vector<float> a,
             std::vector<int64_t> b_shape, std::vector<float> b, float scale, RopeStyle rope) {
    const std::string& p = adapter_->path;
    if (layer < 0 || layer >= c_.n_layers)
      return Err("{}: tensor {} is for layer {}, but the base model has {} layers", p, tensor, layer, c_.n_layers);
    if ((t == LoraTarget::kGate || t == LoraTarget::kUp || t == LoraTarget::kDown) && c_.LayerIsMoe(layer))
      return Err("{}: {}: layer {} of the base model is a mixture-of-experts layer; adapters on its experts are not "
                 "supported (attention targets are)", p, tensor, layer);
    auto [in, out] = LoraTargetShape(c_, t);
    if (a_shape.size() != 2 || b_shape.size() != 2 || a_shape[0] != b_shape[1] || a_shape[0] <= 0)
      return Err("{}: {}: A {} and B {} are not [rank, in] and [out, rank] of one rank", p, tensor,
                 ShapeString(a_shape), ShapeString(b_shape));
    if (a_shape[1] != in || b_shape[0] != out)
      return Err("{}: {}: adapter maps {} -> {} but the base model's {} maps {} -> {} (an adapter for another model?)",
                 p, tensor, a_shape[1], b_shape[0], LoraTargetHfName(t), in, out);
    LoraWeights& w = adapter_->layers[static_cast<size_t>(layer)][static_cast<size_t>(t)];
    if (w.rank != 0) return Err("{}: {}: layer {} {} is adapted twice", p, tensor, layer, LoraTargetHfName(t));
    if (!std::isfinite(scale)) return Err("{}: scale {} is not finite", p, scale);
    if ((t == LoraTarget::kQ || t == LoraTarget::kK) && rope != c_.rope_style) {
      const int heads = t == LoraTarget::kQ ? c_.n_heads : c_.n_kv_heads;
      if (c_.rotary() != c_.head_dim)
        return Err("{}: {}: re-pairing q/k rows for partial rotary embeddings is not supported", p, tensor);
      b = PermuteRopeRows(b, out, a_shape[0], heads, rope, c_.rope_style);
    }
    w.rank = static_cast<int32_t>(a_shape[0]);
    w.a = std::move(a);
    w.b = std::move(b);
    w.scale = scale;
    adapter_->max_rank = std::max(adapter_->max_rank, w.rank);
    return Status::Ok();
  }

  Result<std::shared_ptr<const LoraAdapter>> Finish() {
    if (adapter_->max_rank == 0) return Err("{}: the adapter has no LoRA tensors", adapter_->path);
    adapter_->id = NewLoraId();
    PrepareLoraForKernels(adapter_.get());
    return std::shared_ptr<const LoraAdapter>(std::move(adapter_));
  }

 private:
  const ModelConfig& c_;
  std::shared_ptr<LoraAdapter> adapter_;
};

Result<boost::json::object> ReadConfig(const std::string& dir) {
  const std::string path = dir + "/adapter_config.json";
  PARALLM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  PARALLM_ASSIGN_OR_RETURN(boost::json::value v, ParseJson(text, path));
  if (!v.is_object()) return Err("{}: not a JSON object", path);
  return v.as_object();
}

const boost::json::value* Field(const boost::json::object& o, std::string_view key) {
  auto it = o.find(key);
  return it == o.end() || it->value().is_null() ? nullptr : &it->value();
}

Result<double> Number(const boost::json::value& v, const std::string& what) {
  if (v.is_int64()) return static_cast<double>(v.as_int64());
  if (v.is_uint64()) return static_cast<double>(v.as_uint64());
  if (v.is_double()) return v.as_double();
  return Err("{} is not a number", what);
}

// A JSON list of strings (or one string) as a vector.
Result<std::vector<std::string>> Strings(const boost::json::value& v, const std::string& what) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.emplace_back(v.as_string());
    return out;
  }
  if (!v.is_array()) return Err("{} is not a list of strings", what);
  for (const auto& e : v.as_array()) {
    if (!e.is_string()) return Err("{} is not a list of strings", what);
    out.emplace_back(e.as_string());
  }
  return out;
}

// mlx-lm: adapters.safetensors holds "model.layers.N.<key>.lora_a" [in, r] and ".lora_b" [r, out]; the update is
// scale * (x @ lora_a) @ lora_b with lora_parameters.scale used as is (tuner/lora.py LoRALinear).
Result<std::shared_ptr<const LoraAdapter>> LoadMlx(const std::string& dir, const ModelConfig& base) {
  const std::string cfg_path = dir + "/adapter_config.json";
  PARALLM_ASSIGN_OR_RETURN(boost::json::object cfg, ReadConfig(dir));
  std::string type = "lora";
  if (const auto* v = Field(cfg, "fine_tune_type")) type = v->is_string() ? std::string(v->as_string()) : "?";
  if (type == "dora")
    return Err("{}: fine_tune_type \"dora\" (DoRA) is not supported; fuse it with mlx_lm.fuse and load the fused "
               "model instead", cfg_path);
  if (type != "lora") return Err("{}: fine_tune_type \"{}\" is not a LoRA adapter (only \"lora\")", cfg_path, type);
  const auto* params_v = Field(cfg, "lora_parameters");
  if (params_v == nullptr || !params_v->is_object()) return Err("{}: missing lora_parameters", cfg_path);
  const boost::json::object& params = params_v->as_object();
  const auto* rank_v = Field(params, "rank");
  const auto* scale_v = Field(params, "scale");
  if (rank_v == nullptr || scale_v == nullptr) return Err("{}: lora_parameters needs rank and scale", cfg_path);
  PARALLM_ASSIGN_OR_RETURN(double rank, Number(*rank_v, cfg_path + ": lora_parameters.rank"));
  PARALLM_ASSIGN_OR_RETURN(double scale, Number(*scale_v, cfg_path + ": lora_parameters.scale"));
  // Which modules of a layer: lora_parameters.keys, else mlx-lm's default for these families (q_proj, v_proj).
  std::set<std::string> keys = {"self_attn.q_proj", "self_attn.v_proj"};
  if (const auto* k = Field(params, "keys")) {
    PARALLM_ASSIGN_OR_RETURN(auto list, Strings(*k, cfg_path + ": lora_parameters.keys"));
    keys = std::set<std::string>(list.begin(), list.end());
  }
  for (const std::string& k : keys) {
    bool known = false;
    for (LoraTarget t : kTargets) known = known || k == LoraTargetHfModule(t);
    if (!known)
      return Err("{}: lora_parameters.keys names \"{}\", which is not a projection of {} parallm can adapt "
                 "(self_attn.q/k/v/o_proj, mlp.gate/up/down_proj)", cfg_path, k, ArchName(base.arch));
  }
  // num_layers: the last N layers (mlx-lm: model.layers[-max(num_layers, 0):], so <= 0 means all); older files
  // call it lora_layers.
  int64_t num_layers = base.n_layers;
  const auto* nl = Field(cfg, "num_layers");
  if (nl == nullptr) nl = Field(cfg, "lora_layers");
  if (nl != nullptr) {
    PARALLM_ASSIGN_OR_RETURN(double n, Number(*nl, cfg_path + ": num_layers"));
    num_layers = n <= 0 ? base.n_layers : static_cast<int64_t>(n);
    if (num_layers > base.n_layers)
      return Err("{}: num_layers {} but the base model has {} layers", cfg_path, num_layers, base.n_layers);
  }
  const int first_layer = base.n_layers - static_cast<int>(num_layers);

  const std::string st_path = dir + "/adapters.safetensors";
  PARALLM_ASSIGN_OR_RETURN(SafetensorsFile st, ReadSafetensors(st_path));
  Builder builder(base, dir, LoraFormat::kMlx);
  for (const auto& [name, view] : st.tensors.tensors) {
    if (!EndsWith(name, ".lora_a")) {
      if (EndsWith(name, ".lora_b")) continue;
      return Err("{}: tensor {} is not a LoRA tensor (lora_a / lora_b); adapters that train other weights are not "
                 "supported", st_path, name);
    }
    const std::string module = name.substr(0, name.size() - 7);
    int layer = -1;
    std::string_view rest;
    if (!ParseLayerName(module, "model.layers.", &layer, &rest) || !keys.count(std::string(rest)))
      return Err("{}: tensor {} is not in lora_parameters.keys of a layer", st_path, name);
    if (layer < first_layer)
      return Err("{}: tensor {} is for layer {}, but num_layers {} adapts layers {}..{} only", st_path, name, layer,
                 num_layers, first_layer, base.n_layers - 1);
    const TensorView* b_view = st.tensors.Find(module + ".lora_b");
    if (b_view == nullptr) return Err("{}: {} has no matching {}.lora_b", st_path, name, module);
    if (view.Rank() != 2 || b_view->Rank() != 2 || view.Dim(1) != rank || b_view->Dim(0) != rank)
      return Err("{}: {}: lora_a {} and lora_b {} do not have rank {} (lora_parameters.rank) as [in, r] and [r, out]",
                 st_path, module, ShapeString(view.shape), ShapeString(b_view->shape), rank);
    PARALLM_ASSIGN_OR_RETURN(std::vector<float> a, ToF32(view, st_path + ": " + name));
    PARALLM_ASSIGN_OR_RETURN(std::vector<float> b, ToF32(*b_view, st_path + ": " + module + ".lora_b"));
    const int64_t in = view.Dim(0), out = b_view->Dim(1), r = view.Dim(1);
    const LoraTarget t = *TargetByHfName(rest.substr(rest.find('.') + 1));
    PARALLM_RETURN_IF_ERROR(builder.Add(name, layer, t, {r, in}, TransposeLoraFactor(a, in, r), {out, r},
                                        TransposeLoraFactor(b, r, out), static_cast<float>(scale), RopeStyle::kHalf));
  }
  return builder.Finish();
}

// PEFT: adapter_model.safetensors holds "base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight" [r, in] and
// "...lora_B.weight" [out, r]; scaling = lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora.
Result<std::shared_ptr<const LoraAdapter>> LoadPeft(const std::string& dir, const ModelConfig& base) {
  const std::string cfg_path = dir + "/adapter_config.json";
  PARALLM_ASSIGN_OR_RETURN(boost::json::object cfg, ReadConfig(dir));
  if (const auto* v = Field(cfg, "peft_type"); v != nullptr && !(v->is_string() && v->as_string() == "LORA"))
    return Err("{}: peft_type {} is not LORA", cfg_path, boost::json::serialize(*v));
  auto flag = [&](const char* key) {
    const auto* v = Field(cfg, key);
    return v != nullptr && v->is_bool() && v->as_bool();
  };
  if (flag("use_dora")) return Err("{}: use_dora (DoRA) is not supported; merge the adapter with PEFT's "
                                   "merge_and_unload and load the merged model instead", cfg_path);
  if (flag("fan_in_fan_out")) return Err("{}: fan_in_fan_out (Conv1D models such as GPT-2) is not supported", cfg_path);
  if (const auto* v = Field(cfg, "bias"); v != nullptr && !(v->is_string() && v->as_string() == "none"))
    return Err("{}: bias {} (trained biases) is not supported, only \"none\"", cfg_path, boost::json::serialize(*v));
  for (const char* key : {"rank_pattern", "alpha_pattern"}) {
    if (const auto* v = Field(cfg, key); v != nullptr && !(v->is_object() && v->as_object().empty()))
      return Err("{}: {} (per-module ranks or alphas) is not supported", cfg_path, key);
  }
  if (const auto* v = Field(cfg, "modules_to_save"); v != nullptr && !(v->is_array() && v->as_array().empty()))
    return Err("{}: modules_to_save {} (fully trained modules beside the adapter) is not supported", cfg_path,
               boost::json::serialize(*v));
  const auto* r_v = Field(cfg, "r");
  const auto* alpha_v = Field(cfg, "lora_alpha");
  if (r_v == nullptr || alpha_v == nullptr) return Err("{}: needs r and lora_alpha", cfg_path);
  PARALLM_ASSIGN_OR_RETURN(double r_cfg, Number(*r_v, cfg_path + ": r"));
  PARALLM_ASSIGN_OR_RETURN(double alpha, Number(*alpha_v, cfg_path + ": lora_alpha"));
  if (r_cfg <= 0) return Err("{}: r {} must be positive", cfg_path, r_cfg);
  const bool rslora = flag("use_rslora");
  const float scale = static_cast<float>(rslora ? alpha / std::sqrt(r_cfg) : alpha / r_cfg);
  // target_modules: a list of module names (matched as the name or its last components) or one regex over the
  // full module name; "all-linear" is every projection.
  std::vector<std::string> targets;
  std::optional<std::regex> target_regex;
  if (const auto* v = Field(cfg, "target_modules")) {
    if (v->is_string() && v->as_string() != "all-linear") {
      try {
        target_regex.emplace(std::string(v->as_string()));
      } catch (const std::regex_error& e) {
        return Err("{}: target_modules regex {}: {}", cfg_path, boost::json::serialize(*v), e.what());
      }
    } else if (!v->is_string()) {
      PARALLM_ASSIGN_OR_RETURN(targets, Strings(*v, cfg_path + ": target_modules"));
    }
  }
  std::optional<std::set<int>> layers;
  if (const auto* v = Field(cfg, "layers_to_transform")) {
    layers.emplace();
    if (v->is_int64()) {
      layers->insert(static_cast<int>(v->as_int64()));
    } else if (v->is_array()) {
      for (const auto& e : v->as_array()) {
        if (!e.is_int64()) return Err("{}: layers_to_transform is not a list of layer numbers", cfg_path);
        layers->insert(static_cast<int>(e.as_int64()));
      }
    } else {
      return Err("{}: layers_to_transform is not a layer number or a list of them", cfg_path);
    }
  }

  const std::string st_path = dir + "/adapter_model.safetensors";
  PARALLM_ASSIGN_OR_RETURN(SafetensorsFile st, ReadSafetensors(st_path));
  Builder builder(base, dir, LoraFormat::kPeft);
  for (const auto& [name, view] : st.tensors.tensors) {
    if (!EndsWith(name, ".lora_A.weight")) {
      if (EndsWith(name, ".lora_B.weight")) continue;
      return Err("{}: tensor {} is not a LoRA tensor (lora_A / lora_B); embeddings, biases and trained modules in an "
                 "adapter are not supported", st_path, name);
    }
    const std::string module = name.substr(0, name.size() - 14);
    std::string_view short_module = module;
    if (StartsWith(short_module, "base_model.model.")) short_module.remove_prefix(17);
    int layer = -1;
    std::string_view rest;
    if (!ParseLayerName(short_module, "model.layers.", &layer, &rest))
      return Err("{}: tensor {} is not in a decoder layer (model.layers.N)", st_path, name);
    const std::string_view leaf = rest.substr(rest.rfind('.') + 1);
    const std::optional<LoraTarget> t = TargetByHfName(leaf);
    if (!t || rest != LoraTargetHfModule(*t))
      return Err("{}: tensor {}: module {} is not a projection of {} parallm can adapt", st_path, name, rest,
                 ArchName(base.arch));
    bool targeted = targets.empty() && !target_regex;
    for (const std::string& tm : targets)
      targeted = targeted || tm == leaf || tm == rest || EndsWith(short_module, "." + tm);
    if (target_regex) targeted = std::regex_match(std::string(short_module), *target_regex);
    if (!targeted) return Err("{}: tensor {} is not among target_modules", st_path, name);
    if (layers && !layers->count(layer))
      return Err("{}: tensor {} is for layer {}, which layers_to_transform leaves out", st_path, name, layer);
    const TensorView* b_view = st.tensors.Find(module + ".lora_B.weight");
    if (b_view == nullptr) return Err("{}: {} has no matching lora_B", st_path, name);
    if (view.Rank() == 2 && view.Dim(0) != static_cast<int64_t>(r_cfg))
      return Err("{}: {} has rank {} but adapter_config.json says r = {}", st_path, name, view.Dim(0), r_cfg);
    PARALLM_ASSIGN_OR_RETURN(std::vector<float> a, ToF32(view, st_path + ": " + name));
    PARALLM_ASSIGN_OR_RETURN(std::vector<float> b, ToF32(*b_view, st_path + ": " + module + ".lora_B.weight"));
    PARALLM_RETURN_IF_ERROR(builder.Add(name, layer, *t, view.shape, std::move(a), b_view->shape, std::move(b), scale,
                                        RopeStyle::kHalf));
  }
  return builder.Finish();
}

// GGUF (llama.cpp): general.type "adapter", adapter.type "lora", adapter.lora.alpha; tensors
// "blk.N.attn_q.weight.lora_a" [r, in] and ".lora_b" [out, r] (outermost first); scale = alpha / r, or 1 when alpha
// is 0 (llama-adapter.cpp get_scale with the user's scale 1). Q/K rows are in the GGUF base's RoPE pairing.
Result<std::shared_ptr<const LoraAdapter>> LoadGguf(const std::string& path, const ModelConfig& base) {
  PARALLM_ASSIGN_OR_RETURN(GgufFile g, GgufFile::Open(path));
  const std::string type = g.GetString("general.type").value_or("");
  if (type != "adapter") return Err("{}: general.type is \"{}\", not \"adapter\" (a model, not a LoRA adapter?)", path, type);
  const std::string adapter_type = g.GetString("adapter.type").value_or("");
  if (adapter_type != "lora") return Err("{}: adapter.type is \"{}\", not \"lora\"", path, adapter_type);
  const std::string arch = g.GetString("general.architecture").value_or("");
  const ArchSpec& spec = SpecFor(base.arch);
  if (arch != spec.gguf_architecture)
    return Err("{}: the adapter is for architecture \"{}\" but the base model is \"{}\"", path, arch,
               spec.gguf_architecture);
  const float alpha = static_cast<float>(g.GetFloat("adapter.lora.alpha").value_or(0.0));
  Builder builder(base, path, LoraFormat::kGguf);
  const TensorSet& ts = g.tensors();
  for (const auto& [name, view] : ts.tensors) {
    if (!EndsWith(name, ".weight.lora_a")) {
      if (EndsWith(name, ".weight.lora_b")) continue;
      return Err("{}: tensor {} is not a LoRA tensor (.lora_a / .lora_b); norms or embeddings in an adapter are not "
                 "supported", path, name);
    }
    const std::string module = name.substr(0, name.size() - 14);  // "blk.N.attn_q"
    int layer = -1;
    std::string_view kind;
    std::optional<LoraTarget> t;
    const std::string dotted = module + ".";  // outlives `kind`, which points into it
    if (ParseLayerName(dotted, "blk.", &layer, &kind)) t = TargetByGgufName(kind.substr(0, kind.size() - 1));
    if (!t) return Err("{}: tensor {} is not a projection parallm can adapt (blk.N.attn_q/k/v/output, ffn_gate/up/down)",
                       path, name);
    const TensorView* b_view = ts.Find(module + ".weight.lora_b");
    if (b_view == nullptr) return Err("{}: {} has no matching .lora_b", path, name);
    if (view.Rank() != 2 || b_view->Rank() != 2 || view.Dim(0) != b_view->Dim(1))
      return Err("{}: {}: lora_a {} and lora_b {} are not [r, in] and [out, r] (lora_a not transposed?)", path, module,
                 ShapeString(view.shape), ShapeString(b_view->shape));
    PARALLM_ASSIGN_OR_RETURN(std::vector<float> a, ToF32(view, path + ": " + name));
    PARALLM_ASSIGN_OR_RETURN(std::vector<float> b, ToF32(*b_view, path + ": " + module + ".weight.lora_b"));
    const float rank = static_cast<float>(view.Dim(0));
    PARALLM_RETURN_IF_ERROR(builder.Add(name, layer, *t, view.shape, std::move(a), b_view->shape, std::move(b),
                                        alpha != 0 ? alpha / rank : 1.0f, spec.gguf_rope_style));
  }
  return builder.Finish();
}

}  // namespace

uint64_t NewLoraId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

const char* LoraTargetHfName(LoraTarget t) {
  static constexpr const char* kNames[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return kNames[static_cast<int>(t)];
}

const char* LoraTargetGgufName(LoraTarget t) {
  static constexpr const char* kNames[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  return kNames[static_cast<int>(t)];
}

const char* LoraTargetHfModule(LoraTarget t) {
  static constexpr const char* kNames[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                           "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                           "mlp.down_proj"};
  return kNames[static_cast<int>(t)];
}

std::pair<int64_t, int64_t> LoraTargetShape(const ModelConfig& c, LoraTarget t) {
  switch (t) {
    case LoraTarget::kQ: return {c.hidden, c.q_dim()};
    case LoraTarget::kK:
    case LoraTarget::kV: return {c.hidden, c.kv_dim()};
    case LoraTarget::kO: return {c.q_dim(), c.hidden};
    case LoraTarget::kGate:
    case LoraTarget::kUp: return {c.hidden, c.ffn};
    case LoraTarget::kDown: return {c.ffn, c.hidden};
  }
  return {0, 0};
}

const char* LoraFormatName(LoraFormat f) {
  switch (f) {
    case LoraFormat::kMlx: return "mlx";
    case LoraFormat::kPeft: return "peft";
    case LoraFormat::kGguf: return "gguf";
  }
  return "?";
}

std::vector<float> TransposeLoraFactor(const std::vector<float>& m, int64_t rows, int64_t cols) {
  std::vector<float> t(m.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[static_cast<size_t>(c * rows + r)] = m[static_cast<size_t>(r * cols + c)];
  return t;
}

void PrepareLoraForKernels(LoraAdapter* adapter) {
  for (auto& layer : adapter->layers) {
    for (LoraWeights& w : layer) {
      if (w.rank == 0) continue;
      w.bt = TransposeLoraFactor(w.b, static_cast<int64_t>(w.b.size()) / w.rank, w.rank);
    }
  }
}

std::string LoraAdapter::Describe() const {
  std::vector<std::string> names;
  int n_layers = 0;
  for (LoraTarget t : kTargets) {
    bool any = false;
    for (const auto& l : layers) any = any || l[static_cast<size_t>(t)].rank > 0;
    if (any) names.emplace_back(LoraTargetHfName(t));
  }
  for (const auto& l : layers) {
    bool any = false;
    for (const auto& w : l) any = any || w.rank > 0;
    n_layers += any ? 1 : 0;
  }
  return fmt::format("{} LoRA on {} in {} layers, rank {}", LoraFormatName(format), fmt::join(names, ","), n_layers,
                     max_rank);
}

Result<std::shared_ptr<const LoraAdapter>> LoadLoraAdapter(const std::string& path, const ModelConfig& base) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (SpecFor(base.arch).fused_projections)
    return Err("{}: adapters for {} (fused qkv_proj / gate_up_proj) are not supported yet", path, ArchName(base.arch));
  if (fs::is_regular_file(path, ec)) {
    if (EndsWith(path, ".gguf")) return LoadGguf(path, base);
    return Err("{}: not a LoRA adapter (a .gguf file, or a folder with adapter_config.json)", path);
  }
  if (!fs::is_directory(path, ec)) return Err("{}: no such adapter file or folder", path);
  if (fs::exists(path + "/adapters.safetensors", ec)) return LoadMlx(path, base);
  if (fs::exists(path + "/adapter_model.safetensors", ec)) return LoadPeft(path, base);
  if (fs::exists(path + "/adapter_model.bin", ec))
    return Err("{}: adapter_model.bin (PyTorch pickle) is not supported; save the adapter with safetensors "
               "(PEFT's default)", path);
  return Err("{}: no adapters.safetensors (mlx-lm) or adapter_model.safetensors (PEFT) in the folder", path);
}

}  // namespace parallm
