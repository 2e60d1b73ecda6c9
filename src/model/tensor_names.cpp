// Canonical (GGUF) <-> Hugging Face tensor names.
#include "model/tensor_names.h"

#include <array>
#include <charconv>
#include <string_view>

#include <fmt/format.h>

#include "util/strings.h"

namespace parallm {
namespace {

struct NamePair {
  std::string_view canonical;
  std::string_view hf;
};
constexpr std::array<NamePair, 3> kGlobal = {{
    {"token_embd", "model.embed_tokens"},
    {"output_norm", "model.norm"},
    {"output", "lm_head"},
}};
constexpr std::array<NamePair, 11> kLayer = {{
    {"attn_norm", "input_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
}};

// Splits "a.b.c.suffix" into module "a.b.c" and suffix ("weight", "bias", "scales", "biases").
bool SplitSuffix(std::string_view name, std::string_view* module, std::string_view* suffix) {
  size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return false;
  *module = name.substr(0, dot);
  *suffix = name.substr(dot + 1);
  return true;
}

// Parses "<prefix><int>.<rest>", returning the int and rest.
bool ParseLayer(std::string_view name, std::string_view prefix, int* layer, std::string_view* rest) {
  if (!StartsWith(name, prefix)) return false;
  name.remove_prefix(prefix.size());
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), *layer);
  if (ec != std::errc() || ptr == name.data() + name.size() || *ptr != '.') return false;
  *rest = std::string_view(ptr + 1, static_cast<size_t>(name.data() + name.size() - ptr - 1));
  return true;
}

}  // namespace

std::string LayerTensor(int layer, const char* kind, const char* suffix) {
  return fmt::format("blk.{}.{}.{}", layer, kind, suffix);
}

std::optional<std::string> HfNameFor(const std::string& canonical) {
  std::string_view module, suffix;
  if (!SplitSuffix(canonical, &module, &suffix)) return std::nullopt;
  for (const NamePair& p : kGlobal)
    if (module == p.canonical) return fmt::format("{}.{}", p.hf, suffix);
  int layer;
  std::string_view kind;
  if (!ParseLayer(module, "blk.", &layer, &kind)) return std::nullopt;
  for (const NamePair& p : kLayer)
    if (kind == p.canonical) return fmt::format("model.layers.{}.{}.{}", layer, p.hf, suffix);
  return std::nullopt;
}

std::optional<std::string> CanonicalNameForHf(const std::string& hf) {
  std::string_view module, suffix;
  if (!SplitSuffix(hf, &module, &suffix)) return std::nullopt;
  for (const NamePair& p : kGlobal)
    if (module == p.hf) return fmt::format("{}.{}", p.canonical, suffix);
  int layer;
  std::string_view kind;
  if (!ParseLayer(module, "model.layers.", &layer, &kind)) return std::nullopt;
  for (const NamePair& p : kLayer)
    if (kind == p.hf) return fmt::format("blk.{}.{}.{}", layer, p.canonical, suffix);
  return std::nullopt;
}

}  // namespace parallm
