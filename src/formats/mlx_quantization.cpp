// Reads the MLX quantization section of config.json (mlx-lm's layout): default affine params plus
// per-module overrides, as mlx-lm's load_model passes them to nn.quantize's class_predicate.
#include <string_view>

#include <fmt/format.h>

#include "formats/hf_folder.h"
#include "formats/json_describe.h"
#include "tensor/mlx_affine.h"

namespace parallm {
namespace {

namespace json = boost::json;

// Keys of the quantization object that are settings; every other key whose value is an object or a bool is
// a module path (mlx-lm's class_predicate looks the module path up in the same object).
bool IsSettingKey(std::string_view key) { return key == "group_size" || key == "bits" || key == "mode"; }

// Reads an integer field; `missing` is used when the key is absent (nullopt: the key is required).
Result<int64_t> IntField(const json::object& obj, std::string_view key, std::optional<int64_t> missing,
                         const std::string& where) {
  const json::value* v = obj.if_contains(key);
  if (v == nullptr) {
    if (missing) return *missing;
    return Err("{}: missing \"{}\"", where, key);
  }
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return Err("{}: \"{}\" = {} is out of range", where, key, v->get_uint64());
  return Err("{}: \"{}\" is not an integer ({})", where, key, DescribeJson(*v));
}

// Parses {"group_size": g, "bits": b, "mode": "affine"}. `defaults` fills absent keys; nullopt makes
// group_size and bits required.
Result<MlxAffineParams> ParseParams(const json::object& obj, std::optional<MlxAffineParams> defaults,
                                    const std::string& where) {
  if (const json::value* mode = obj.if_contains("mode")) {
    if (!mode->is_string()) return Err("{}: \"mode\" is not a string", where);
    if (mode->get_string() != "affine")
      return Err("{}: quantization mode '{}' is not supported (parallm reads MLX 'affine' quantization only)", where,
                 std::string(mode->get_string()));
  }
  std::optional<int64_t> default_bits, default_group;
  if (defaults) {
    default_bits = defaults->bits;
    default_group = defaults->group_size;
  }
  PARALLM_ASSIGN_OR_RETURN(int64_t bits, IntField(obj, "bits", default_bits, where));
  PARALLM_ASSIGN_OR_RETURN(int64_t group_size, IntField(obj, "group_size", default_group, where));
  // IsSupportedMlxAffine (tensor/mlx_affine.h) is the one list of what the kernels take; the range check only
  // keeps the int conversion exact.
  MlxAffineParams p;
  bool in_range = bits > 0 && bits <= 64 && group_size > 0 && group_size <= (1 << 20);
  if (in_range) {
    p.bits = static_cast<int>(bits);
    p.group_size = static_cast<int>(group_size);
  }
  if (!in_range || !IsSupportedMlxAffine(p))
    return Err(
        "{}: bits {} with group_size {} is not supported (parallm reads bits 2, 3, 4, 5, 6 or 8 and "
        "group_size 32, 64 or 128)",
        where, bits, group_size);
  return p;
}

Result<MlxQuantization> ParseSection(const json::object& section, const std::string& where) {
  MlxQuantization q;
  PARALLM_ASSIGN_OR_RETURN(q.defaults, ParseParams(section, std::nullopt, where));
  for (const auto& kv : section) {
    std::string module(kv.key());
    if (IsSettingKey(module)) continue;
    const json::value& v = kv.value();
    if (v.is_bool()) {
      // false: the module stays in float; true: quantized with the defaults (nn.quantize treats a bare
      // true from class_predicate that way).
      q.overrides[module] = v.get_bool() ? std::optional<MlxAffineParams>(q.defaults) : std::nullopt;
    } else if (const json::object* o = v.if_object()) {
      // A dict goes to the module's to_quantized(**params) as is, so keys it leaves out take MLX's own
      // defaults for affine mode (group_size 64, bits 4), not the config's.
      PARALLM_ASSIGN_OR_RETURN(MlxAffineParams p, ParseParams(*o, MlxAffineParams{}, where + "." + module));
      q.overrides[module] = p;
    }
    // Other scalar keys are not module paths; mlx-lm ignores them, and so do we.
  }
  return q;
}

}  // namespace

std::optional<MlxAffineParams> MlxQuantization::ForModule(const std::string& module) const {
  auto it = overrides.find(module);
  if (it != overrides.end()) return it->second;
  return defaults;
}

Result<std::optional<MlxQuantization>> ParseMlxQuantization(const json::object& config) {
  // mlx-lm writes the section under both names; "quantization" wins, as in mlx-lm's load_model.
  if (const json::value* v = config.if_contains("quantization"); v != nullptr && !v->is_null()) {
    const json::object* section = v->if_object();
    if (section == nullptr) return Err("config.json: \"quantization\" is not a JSON object");
    PARALLM_ASSIGN_OR_RETURN(MlxQuantization q, ParseSection(*section, "config.json: quantization"));
    return std::optional<MlxQuantization>(std::move(q));
  }
  if (const json::value* v = config.if_contains("quantization_config"); v != nullptr && !v->is_null()) {
    const json::object* section = v->if_object();
    if (section == nullptr) return Err("config.json: \"quantization_config\" is not a JSON object");
    // Transformers' quantization_config (GPTQ, AWQ, bitsandbytes, FP8, ...) names its quant_method; those
    // store weights in layouts parallm does not read, so say so instead of loading packed data as floats.
    if (const json::value* method = section->if_contains("quant_method")) {
      std::string name = method->is_string() ? std::string(method->get_string()) : DescribeJson(*method);
      return Err(
          "config.json: quantization_config quant_method '{}' is not supported (parallm reads MLX affine "
          "quantization and GGUF)",
          name);
    }
    PARALLM_ASSIGN_OR_RETURN(MlxQuantization q, ParseSection(*section, "config.json: quantization_config"));
    return std::optional<MlxQuantization>(std::move(q));
  }
  return std::optional<MlxQuantization>();
}

}  // namespace parallm
