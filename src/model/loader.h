// Model loading: recognizes a GGUF file, a Hugging Face folder, an MLX-quantized folder or a llama2.c
// checkpoint, reads its ModelConfig, and binds its weights by name.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "model/config.h"
#include "model/weights.h"
#include "tokenizer/vocab.h"
#include "util/status.h"

namespace parallm {

enum class ModelFormat { kGguf, kHfFolder, kMlxFolder, kLlama2c };
std::string FormatName(ModelFormat f);  // "gguf", "hf", "mlx", "llama2c"

struct LoadedModel {
  ModelConfig config;
  ModelWeights weights;
  ModelFormat format = ModelFormat::kGguf;
  std::string path;
  std::string weight_types;  // e.g. "q8_0 x 169, f32 x 49" for `parallm info`
  std::optional<Vocab> vocab;  // GGUF files with tokenizer.ggml.* metadata
  // Every token that ends generation: the vocabulary's EOS and llama.cpp's EOT/EOM (GGUF), config.json's and
  // generation_config.json's eos_token_id (an id or a list: Gemma's <end_of_turn>, Phi-3's <|end|>).
  std::vector<int32_t> eos_ids;
};

// Every error names the path and says what was wrong or missing.
Result<LoadedModel> LoadModel(const std::string& path);

// Binds tensors named canonically (GGUF names) to a model of shape `config`, with the same checks as
// loading a file; `label` names the model in errors.
Result<LoadedModel> BindModel(const ModelConfig& config, TensorSet tensors, const std::string& label);

}  // namespace parallm
