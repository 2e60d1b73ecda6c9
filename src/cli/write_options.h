// The output flags shared by make-model and convert, as WriteOptions.
#pragma once

#include <string>

#include "model/model_writer.h"

namespace parallm::cli {

// format: gguf | hf | mlx; dtype: a GGUF weight type (or q4_k_m) for gguf, a float type for hf/mlx;
// empty dtype picks the default (q8_0 for gguf, bf16 for hf, f16 for mlx).
// high_bits > 0 (MLX): mixed precision, see WriteOptions::mlx_high_bits; shard_mb > 0: HF/MLX shards of that size.
Result<WriteOptions> ParseWriteOptions(const std::string& format, const std::string& dtype, int bits, int group_size,
                                       int high_bits = 0, int shard_mb = 0);

}  // namespace parallm::cli
