// Canonical (GGUF) <-> Hugging Face tensor names.
#include "model/tensor_names.h"

#include <array>
#include <charconv>
#include <span>
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
// Llama's names; the families below override some.
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
// Gemma 2 and 3: four norms a layer (llama.cpp's mapping of pre/post_feedforward_layernorm).
constexpr std::array<NamePair, 3> kPostNormLayer = {{
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"post_attention_norm", "post_attention_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
}};
// Phi-3: fused projections.
constexpr std::array<NamePair, 2> kFusedLayer = {{
    {"attn_qkv", "self_attn.qkv_proj"},
    {"ffn_up", "mlp.gate_up_proj"},
}};

// The layer names of `arch`: its overrides first, then Llama's.
std::span<const NamePair> Overrides(Arch arch) {
  if (arch == Arch::kGemma2 || arch == Arch::kGemma3) return kPostNormLayer;
  if (arch == Arch::kPhi3) return kFusedLayer;
  return {};
}

std::optional<std::string_view> LayerHf(std::string_view canonical, Arch arch) {
  for (const NamePair& p : Overrides(arch))
    if (canonical == p.canonical) return p.hf;
  for (const NamePair& p : kLayer)
    if (canonical == p.canonical) return p.hf;
  return std::nullopt;
}

std::optional<std::string_view> LayerCanonical(std::string_view hf, Arch arch) {
  for (const NamePair& p : Overrides(arch))
    if (hf == p.hf) return p.canonical;
  for (const NamePair& p : kLayer)
    if (hf == p.hf) return p.canonical;
  return std::nullopt;
}

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

std::optional<std::string> HfNameFor(const std::string& canonical, Arch arch) {
  std::string_view module, suffix;
  if (!SplitSuffix(canonical, &module, &suffix)) return std::nullopt;
  for (const NamePair& p : kGlobal)
    if (module == p.canonical) return fmt::format("{}.{}", p.hf, suffix);
  int layer;
  std::string_view kind;
  if (!ParseLayer(module, "blk.", &layer, &kind)) return std::nullopt;
  if (auto hf = LayerHf(kind, arch)) return fmt::format("model.layers.{}.{}.{}", layer, *hf, suffix);
  return std::nullopt;
}

std::optional<std::string> CanonicalNameForHf(const std::string& hf, Arch arch) {
  std::string_view module, suffix;
  if (!SplitSuffix(hf, &module, &suffix)) return std::nullopt;
  for (const NamePair& p : kGlobal)
    if (module == p.hf) return fmt::format("{}.{}", p.canonical, suffix);
  int layer;
  std::string_view kind;
  if (!ParseLayer(module, "model.layers.", &layer, &kind)) return std::nullopt;
  if (auto canonical = LayerCanonical(kind, arch)) return fmt::format("blk.{}.{}.{}", layer, *canonical, suffix);
  return std::nullopt;
}

}  // namespace parallm
