// The output side shared by make-model and convert: the flags, as WriteOptions, and writing with a progress bar.
#pragma once

#include <functional>
#include <string>

#include "model/model_writer.h"

namespace parallm::cli {

// format: gguf | hf | mlx; dtype: a GGUF weight type (or q4_k_m) for gguf, a float type for hf/mlx;
// empty dtype picks the default (q8_0 for gguf, bf16 for hf, f16 for mlx).
// high_bits > 0 (MLX): mixed precision, see WriteOptions::mlx_high_bits; shard_mb > 0: HF/MLX shards of that size.
Result<WriteOptions> ParseWriteOptions(const std::string& format, const std::string& dtype, int bits, int group_size,
                                       int high_bits = 0, int shard_mb = 0);

// Writes a model to `output`, showing progress as `label` ("generating x.gguf"): `produce` hands every weight to
// the sink it is given (GenerateRandomWeights, EmitWeights).
Status WriteModel(const ModelConfig& config, RopeStyle rope_style, const WriteOptions& options, const Vocab& vocab,
                  const std::string& label, const std::string& output,
                  const std::function<Status(const TensorSink&)>& produce);

}  // namespace parallm::cli
