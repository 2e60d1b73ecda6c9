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

// Mixture-of-experts layers (Qwen2-MoE, Qwen3-MoE): the router, the experts stacked in one 3-D tensor (GGUF's
// merged ffn_*_exps; mlx-lm's switch_mlp), the shared expert and its gate (Qwen2-MoE). Per-expert tensors
// (Hugging Face's mlp.experts.N.*, old llama.cpp files' ffn_gate.N) are mapped by ExpertHf below.
constexpr std::array<NamePair, 9> kQwenMoeLayer = {{
    {"ffn_gate_inp", "mlp.gate"},
    {"ffn_gate_exps", "mlp.switch_mlp.gate_proj"},
    {"ffn_up_exps", "mlp.switch_mlp.up_proj"},
    {"ffn_down_exps", "mlp.switch_mlp.down_proj"},
    {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
    {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
    {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
    {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
    {"ffn_norm", "post_attention_layernorm"},
}};
// Mixtral: block_sparse_moe, experts' w1 (gate), w3 (up), w2 (down).
constexpr std::array<NamePair, 4> kMixtralLayer = {{
    {"ffn_gate_inp", "block_sparse_moe.gate"},
    {"ffn_gate_exps", "block_sparse_moe.switch_mlp.gate_proj"},
    {"ffn_up_exps", "block_sparse_moe.switch_mlp.up_proj"},
    {"ffn_down_exps", "block_sparse_moe.switch_mlp.down_proj"},
}};
// Per-expert names: canonical kind ("ffn_gate") -> the HF projection of one expert.
constexpr std::array<NamePair, 3> kQwenExpert = {{{"ffn_gate", "gate_proj"}, {"ffn_up", "up_proj"}, {"ffn_down", "down_proj"}}};
constexpr std::array<NamePair, 3> kMixtralExpert = {{{"ffn_gate", "w1"}, {"ffn_up", "w3"}, {"ffn_down", "w2"}}};

bool IsQwenMoe(Arch arch) { return arch == Arch::kQwen2Moe || arch == Arch::kQwen3Moe; }

bool ParseLayer(std::string_view name, std::string_view prefix, int* layer, std::string_view* rest);

// Nemotron-H: the published checkpoints' names under "backbone." (transformers maps them to "model."; both load).
// Canonical names are llama.cpp's nemotron_h tensors: one norm a layer (attn_norm), the Mamba-2 mixer's ssm_*, the
// ungated MLP's ffn_up/ffn_down, the experts and the router's correction bias (exp_probs_b). Whole names after the
// layer prefix: A_log, D and dt_bias have no ".weight".
constexpr std::array<NamePair, 3> kNemotronGlobal = {{
    {"token_embd.weight", "backbone.embeddings.weight"},
    {"output_norm.weight", "backbone.norm_f.weight"},
    {"output.weight", "lm_head.weight"},
}};
constexpr std::array<NamePair, 21> kNemotronLayer = {{
    {"attn_norm.weight", "norm.weight"},
    {"ssm_in.weight", "mixer.in_proj.weight"},
    {"ssm_conv1d.weight", "mixer.conv1d.weight"},
    {"ssm_conv1d.bias", "mixer.conv1d.bias"},
    {"ssm_dt.bias", "mixer.dt_bias"},
    {"ssm_a", "mixer.A_log"},
    {"ssm_d", "mixer.D"},
    {"ssm_norm.weight", "mixer.norm.weight"},
    {"ssm_out.weight", "mixer.out_proj.weight"},
    {"attn_q.weight", "mixer.q_proj.weight"},
    {"attn_k.weight", "mixer.k_proj.weight"},
    {"attn_v.weight", "mixer.v_proj.weight"},
    {"attn_output.weight", "mixer.o_proj.weight"},
    {"ffn_up.weight", "mixer.up_proj.weight"},
    {"ffn_down.weight", "mixer.down_proj.weight"},
    {"ffn_gate_inp.weight", "mixer.gate.weight"},
    {"exp_probs_b.bias", "mixer.gate.e_score_correction_bias"},
    {"ffn_up_shexp.weight", "mixer.shared_experts.up_proj.weight"},
    {"ffn_down_shexp.weight", "mixer.shared_experts.down_proj.weight"},
    {"ffn_up_exps.weight", "mixer.switch_mlp.fc1.weight"},
    {"ffn_down_exps.weight", "mixer.switch_mlp.fc2.weight"},
}};

std::optional<std::string> NemotronHf(std::string_view canonical) {
  // MLX's .scales/.biases sit beside their module's .weight.
  for (std::string_view q : {".scales", ".biases"}) {
    if (!EndsWith(canonical, q)) continue;
    auto hf = NemotronHf(std::string(canonical.substr(0, canonical.size() - q.size())) + ".weight");
    if (!hf || !EndsWith(*hf, ".weight")) return std::nullopt;
    return hf->substr(0, hf->size() - 7) + std::string(q);
  }
  for (const NamePair& p : kNemotronGlobal)
    if (canonical == p.canonical) return std::string(p.hf);
  if (!StartsWith(canonical, "blk.")) return std::nullopt;
  std::string_view rest = canonical.substr(4);
  int layer;
  auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), layer);
  if (ec != std::errc() || ptr == rest.data() + rest.size() || *ptr != '.') return std::nullopt;
  std::string_view kind(ptr + 1, static_cast<size_t>(rest.data() + rest.size() - ptr - 1));
  const std::string prefix = fmt::format("backbone.layers.{}.", layer);
  for (const NamePair& p : kNemotronLayer)
    if (kind == p.canonical) return prefix + std::string(p.hf);
  // Per-expert tensors: ffn_up.E.weight <-> mixer.experts.E.up_proj.weight.
  for (std::string_view proj : {"up", "down"}) {
    const std::string head = fmt::format("ffn_{}.", proj);
    if (!StartsWith(kind, head) || !EndsWith(kind, ".weight")) continue;
    std::string_view num = kind.substr(head.size(), kind.size() - head.size() - 7);
    int expert;
    auto [p2, ec2] = std::from_chars(num.data(), num.data() + num.size(), expert);
    if (ec2 == std::errc() && p2 == num.data() + num.size())
      return fmt::format("{}mixer.experts.{}.{}_proj.weight", prefix, expert, proj);
  }
  return std::nullopt;
}

std::optional<std::string> NemotronCanonical(std::string_view hf) {
  for (std::string_view q : {".scales", ".biases"}) {
    if (!EndsWith(hf, q)) continue;
    auto canonical = NemotronCanonical(std::string(hf.substr(0, hf.size() - q.size())) + ".weight");
    if (!canonical || !EndsWith(*canonical, ".weight")) return std::nullopt;
    return canonical->substr(0, canonical->size() - 7) + std::string(q);
  }
  std::string name(hf);
  if (StartsWith(name, "model.")) name = "backbone." + name.substr(6);  // transformers' own save_pretrained names
  for (const NamePair& p : kNemotronGlobal)
    if (name == p.hf) return std::string(p.canonical);
  std::string_view rest;
  int layer;
  if (!ParseLayer(name, "backbone.layers.", &layer, &rest)) return std::nullopt;
  for (const NamePair& p : kNemotronLayer)
    if (rest == p.hf) return fmt::format("blk.{}.{}", layer, p.canonical);
  constexpr std::string_view kExperts = "mixer.experts.";
  if (!StartsWith(rest, kExperts)) return std::nullopt;
  rest.remove_prefix(kExperts.size());
  int expert;
  auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), expert);
  if (ec != std::errc() || ptr == rest.data() + rest.size() || *ptr != '.') return std::nullopt;
  std::string_view proj(ptr + 1, static_cast<size_t>(rest.data() + rest.size() - ptr - 1));
  if (proj == "up_proj.weight") return fmt::format("blk.{}.ffn_up.{}.weight", layer, expert);
  if (proj == "down_proj.weight") return fmt::format("blk.{}.ffn_down.{}.weight", layer, expert);
  return std::nullopt;
}

// "ffn_gate.3" <-> "mlp.experts.3.gate_proj" (Qwen) or "block_sparse_moe.experts.3.w1" (Mixtral).
std::optional<std::string> ExpertHf(std::string_view kind, Arch arch) {
  if (!IsQwenMoe(arch) && arch != Arch::kMixtral) return std::nullopt;
  const size_t dot = kind.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  int expert;
  std::string_view num = kind.substr(dot + 1);
  auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), expert);
  if (ec != std::errc() || ptr != num.data() + num.size()) return std::nullopt;
  const bool mixtral = arch == Arch::kMixtral;
  for (const NamePair& p : mixtral ? std::span<const NamePair>(kMixtralExpert) : std::span<const NamePair>(kQwenExpert))
    if (kind.substr(0, dot) == p.canonical)
      return fmt::format("{}.experts.{}.{}", mixtral ? "block_sparse_moe" : "mlp", expert, p.hf);
  return std::nullopt;
}

std::optional<std::string> ExpertCanonical(std::string_view hf, Arch arch) {
  if (!IsQwenMoe(arch) && arch != Arch::kMixtral) return std::nullopt;
  const bool mixtral = arch == Arch::kMixtral;
  const std::string_view prefix = mixtral ? "block_sparse_moe.experts." : "mlp.experts.";
  if (!StartsWith(hf, prefix)) return std::nullopt;
  hf.remove_prefix(prefix.size());
  int expert;
  auto [ptr, ec] = std::from_chars(hf.data(), hf.data() + hf.size(), expert);
  if (ec != std::errc() || ptr == hf.data() + hf.size() || *ptr != '.') return std::nullopt;
  std::string_view proj(ptr + 1, static_cast<size_t>(hf.data() + hf.size() - ptr - 1));
  for (const NamePair& p : mixtral ? std::span<const NamePair>(kMixtralExpert) : std::span<const NamePair>(kQwenExpert))
    if (proj == p.hf) return fmt::format("{}.{}", p.canonical, expert);
  return std::nullopt;
}

// The layer names of `arch`: its overrides first, then Llama's.
std::span<const NamePair> Overrides(Arch arch) {
  if (arch == Arch::kGemma2 || arch == Arch::kGemma3) return kPostNormLayer;
  if (arch == Arch::kPhi3) return kFusedLayer;
  if (IsQwenMoe(arch)) return kQwenMoeLayer;
  if (arch == Arch::kMixtral) return kMixtralLayer;
  return {};
}

std::optional<std::string> LayerHf(std::string_view canonical, Arch arch) {
  if (auto e = ExpertHf(canonical, arch)) return e;
  for (const NamePair& p : Overrides(arch))
    if (canonical == p.canonical) return std::string(p.hf);
  for (const NamePair& p : kLayer)
    if (canonical == p.canonical) return std::string(p.hf);
  return std::nullopt;
}

std::optional<std::string> LayerCanonical(std::string_view hf, Arch arch) {
  if (auto e = ExpertCanonical(hf, arch)) return e;
  for (const NamePair& p : Overrides(arch))
    if (hf == p.hf) return std::string(p.canonical);
  for (const NamePair& p : kLayer)
    if (hf == p.hf) return std::string(p.canonical);
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
  if (arch == Arch::kNemotronH) return NemotronHf(canonical);
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
  if (arch == Arch::kNemotronH) return NemotronCanonical(hf);
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
