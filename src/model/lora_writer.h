// LoRA adapter writers: an adapter as mlx-lm, Hugging Face PEFT or llama.cpp GGUF would save it, and random
// adapters for a model shape (`parallm make-model --lora`, tests).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/lora.h"
#include "util/status.h"

namespace parallm {

struct RandomLoraSpec {
  int32_t rank = 8;
  std::vector<LoraTarget> targets = {LoraTarget::kQ, LoraTarget::kV};
  float scale = 2.0f;      // the update's multiplier (each format stores it its own way)
  int32_t num_layers = 0;  // the last N layers (mlx-lm's num_layers); 0: all
  uint64_t seed = 1;
};

// A random adapter for a model of shape `c` (A uniform in +-1/sqrt(in) as mlx-lm initializes it, B uniform in
// +-1/sqrt(rank) as training leaves it nonzero); q/k rows of B in Hugging Face's pairing (RopeStyle::kHalf).
LoraAdapter MakeRandomLora(const ModelConfig& c, const RandomLoraSpec& spec);

struct LoraWriteOptions {
  LoraFormat format = LoraFormat::kPeft;
  bool rslora = false;  // PEFT: store lora_alpha for use_rslora (alpha / sqrt(r)) instead of alpha / r
  // The pairing of `adapter`'s q/k rows of B (the base model's ModelConfig::rope_style for a loaded adapter);
  // the GGUF writer re-pairs them for the architecture's GGUF convention as convert_lora_to_gguf.py does.
  RopeStyle rope_style = RopeStyle::kHalf;
};

// Writes `adapter` for a base of shape `c` to `path` (a folder for mlx / PEFT, a .gguf file for GGUF) in f32.
// mlx-lm's format needs the same rank, scale and modules in a contiguous run of final layers: other adapters
// are refused with a message, as are PEFT/GGUF adapters whose projections differ in scale.
Status WriteLoraAdapter(const LoraAdapter& adapter, const ModelConfig& c, const LoraWriteOptions& options,
                        const std::string& path);

// Fusing (mlx_lm.fuse, PEFT's merge_and_unload): adds scale * B A to `values` when `name` is a projection the adapter
// adapts ("blk.3.attn_q.weight", shape [out, in], in the pairing of the base the adapter was loaded for).
// Returns whether it did.
bool FuseLora(const LoraAdapter& adapter, const std::string& name, const std::vector<int64_t>& shape,
              std::vector<float>& values);

}  // namespace parallm
