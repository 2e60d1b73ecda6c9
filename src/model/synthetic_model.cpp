// Synthetic models in memory: the preset's config, seeded random weights, quantized by the GGUF writer's
// tensors, bound without touching the disk.
#include "model/synthetic_model.h"

#include "model/model_writer.h"
#include "model/synthetic.h"
#include "util/strings.h"

namespace parallm {

bool IsSyntheticSpec(const std::string& spec) { return StartsWith(spec, "synthetic:"); }

Result<std::unique_ptr<Model>> BuildSyntheticModel(const std::string& spec) {
  std::vector<std::string> parts = Split(spec, ':');
  if (parts.size() < 2 || parts.size() > 3 || parts[0] != "synthetic")
    return Err("'{}' is not a synthetic model spec (synthetic:PRESET or synthetic:PRESET:TYPE)", spec);
  PARALLM_ASSIGN_OR_RETURN(ModelConfig config, PresetConfig(parts[1], nullptr));
  WriteOptions options;
  options.format = ModelFormat::kGguf;
  options.gguf_type = DType::kQ8_0;
  if (parts.size() == 3) {
    if (parts[2] == "q4_k_m") {
      options.q4_k_m = true;
    } else {
      auto type = ParseDType(parts[2]);
      if (!type || !(Info(*type).is_float || Info(*type).is_block_quantized))
        return Err("'{}': {} is not a weight type (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, q4_k_m)", spec, parts[2]);
      options.gguf_type = *type;
    }
  }
  ModelWriter writer(config, RopeStyle::kHalf, options, Vocab::ByteLevel(config.vocab));
  PARALLM_RETURN_IF_ERROR(GenerateRandomWeights(config, 0, [&](const std::string& name, std::vector<int64_t> shape,
                                                               std::vector<float> values) {
    return writer.Add(name, std::move(shape), std::move(values));
  }));
  PARALLM_ASSIGN_OR_RETURN(LoadedModel loaded, writer.FinishInMemory(spec));
  return std::make_unique<Model>(std::move(loaded));
}

Result<std::unique_ptr<Model>> LoadModelSpec(const std::string& spec) {
  if (IsSyntheticSpec(spec)) return BuildSyntheticModel(spec);
  return Model::Load(spec);
}

}  // namespace parallm
