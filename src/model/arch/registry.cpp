// Lookup of model families by the names users, GGUF files and config.json use.
#include <array>

#include "model/arch/arch.h"

namespace parallm {

std::span<const ArchSpec* const> AllSpecs() {
  // Mixtral after Llama: its GGUF files say "llama" (experts make a Llama file a Mixtral one, see the loader).
  static const std::array<const ArchSpec*, 12> specs = {&LlamaSpec(),    &MistralSpec(),  &Qwen2Spec(),  &Qwen3Spec(),
                                                        &GemmaSpec(),    &Gemma2Spec(),   &Gemma3Spec(),  &Phi3Spec(),
                                                        &Qwen2MoeSpec(), &Qwen3MoeSpec(), &MixtralSpec(), &NemotronHSpec()};
  return specs;
}

const ArchSpec& SpecFor(Arch arch) {
  for (const ArchSpec* s : AllSpecs())
    if (s->arch == arch) return *s;
  return LlamaSpec();
}

std::string SupportedNames() {
  std::string s;
  for (const ArchSpec* spec : AllSpecs()) s += (s.empty() ? "" : ", ") + std::string(spec->name);
  return s;
}

std::string SupportedHfModelTypes() {
  std::string s;
  for (const ArchSpec* spec : AllSpecs()) s += (s.empty() ? "" : ", ") + std::string(spec->hf_model_type);
  return s;
}

const ArchSpec* SpecByName(std::string_view name) {
  for (const ArchSpec* s : AllSpecs())
    if (s->name == name) return s;
  return nullptr;
}

std::string GgufArchitectureFor(const ModelConfig& c) {
  const ArchSpec& spec = SpecFor(c.arch);
  const bool experts = c.hybrid() ? c.layer_pattern.find('E') != std::string::npos : c.n_experts > 0;
  return std::string(experts && !spec.gguf_moe_architecture.empty() ? spec.gguf_moe_architecture
                                                                    : spec.gguf_architecture);
}

const ArchSpec* SpecByGgufArchitecture(std::string_view gguf_architecture) {
  // Several families share a GGUF name ("llama" for Mistral too): the first listed wins.
  for (const ArchSpec* s : AllSpecs())
    if (s->gguf_architecture == gguf_architecture ||
        (!s->gguf_moe_architecture.empty() && s->gguf_moe_architecture == gguf_architecture))
      return s;
  return nullptr;
}

const ArchSpec* SpecByHfModelType(std::string_view model_type) {
  for (const ArchSpec* s : AllSpecs())
    if (s->hf_model_type == model_type) return s;
  return nullptr;
}

}  // namespace parallm
