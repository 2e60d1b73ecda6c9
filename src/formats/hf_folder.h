// Hugging Face model folders: config.json plus model.safetensors or shards listed in
// model.safetensors.index.json; MLX-quantized (mlx-community) folders are the same with a
// `quantization` section in config.json. Reading and writing.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <boost/json.hpp>

#include "tensor/mlx_affine.h"
#include "tensor/tensor.h"
#include "util/status.h"

namespace parallm {

// config.json `quantization` (MLX): defaults plus per-module overrides keyed by module path
// ("model.layers.0.mlp.down_proj": {"group_size": 64, "bits": 8}, or `false` for a module left unquantized).
struct MlxQuantization {
  MlxAffineParams defaults;
  std::map<std::string, std::optional<MlxAffineParams>> overrides;
  // Params for the module whose weight is "<module>.weight"; nullopt when the module is not quantized.
  std::optional<MlxAffineParams> ForModule(const std::string& module) const;
};
// Parses config["quantization"] (or config["quantization_config"] in MLX's layout); nullopt when absent.
// Rejects modes other than "affine", and bits/group sizes outside IsSupportedMlxAffine.
Result<std::optional<MlxQuantization>> ParseMlxQuantization(const boost::json::object& config);

struct HfFolder {
  std::string path;
  boost::json::object config;                   // config.json
  std::optional<MlxQuantization> quantization;  // MLX folders only
  TensorSet tensors;                            // every tensor of every shard, by name
};

// Opens a folder: config.json, then model.safetensors, or the shards named by model.safetensors.index.json
// (every tensor in the index must be found in the shard it names, and no tensor may appear twice).
Result<HfFolder> OpenHfFolder(const std::string& dir);

// Writes `tensors` as model.safetensors, or as shards of at most `max_shard_bytes` (0: one file) named
// model-00001-of-0000N.safetensors with model.safetensors.index.json; writes config.json. Creates `dir`.
Status WriteHfFolder(const std::string& dir, const boost::json::object& config, const TensorSet& tensors,
                     size_t max_shard_bytes = 0);

// Parses JSON text, with errors naming `what` (a path) and the position.
Result<boost::json::value> ParseJson(const std::string& text, const std::string& what);

}  // namespace parallm
