// Parsing of the output flags shared by make-model and convert (--format/--to, --dtype, --bits, --group-size), and
// the write with its progress bar.
#include "cli/write_options.h"

#include <algorithm>

#include "util/progress.h"

namespace parallm::cli {

Result<WriteOptions> ParseWriteOptions(const std::string& format, const std::string& dtype, int bits, int group_size,
                                       int high_bits, int shard_mb) {
  WriteOptions w;
  if (format == "gguf") {
    w.format = ModelFormat::kGguf;
    std::string t = dtype.empty() ? "q8_0" : dtype;
    if (t == "q4_k_m" || t == "Q4_K_M") {
      w.q4_k_m = true;
      w.gguf_type = DType::kQ4_K;
    } else {
      auto parsed = ParseDType(t);
      if (!parsed || !(Info(*parsed).is_float || Info(*parsed).is_block_quantized))
        return Err("--dtype {} is not a GGUF weight type (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, q4_k_m)", t);
      w.gguf_type = *parsed;
    }
  } else if (format == "hf" || format == "mlx") {
    w.format = format == "hf" ? ModelFormat::kHfFolder : ModelFormat::kMlxFolder;
    std::string t = dtype.empty() ? (format == "hf" ? "bf16" : "f16") : dtype;
    auto parsed = ParseDType(t);
    if (!parsed || !Info(*parsed).is_float)
      return Err("--dtype {} is not a float type for a {} folder (f32, f16, bf16)", t, format);
    w.float_type = *parsed;
    w.mlx.bits = bits;
    w.mlx.group_size = group_size;
    w.max_shard_bytes = static_cast<size_t>(std::max(shard_mb, 0)) << 20;
    w.mlx_high_bits = high_bits;
    MlxAffineParams high{high_bits, group_size};
    if (format == "mlx" && high_bits > 0 && !IsSupportedMlxAffine(high))
      return Err("--high-bits {}: MLX affine quantization takes bits 2, 3, 4, 5, 6 or 8", high_bits);
    if (format != "mlx" && high_bits > 0) return Err("--high-bits applies to --format mlx only");
    if (format == "mlx" && !IsSupportedMlxAffine(w.mlx))
      return Err("--bits {} --group-size {}: MLX affine quantization takes bits 2, 3, 4, 5, 6 or 8 and group size "
                 "32, 64 or 128",
                 bits, group_size);
  } else {
    return Err("--format {} is not one of gguf, hf, mlx", format);
  }
  if (w.format == ModelFormat::kGguf && (high_bits > 0 || shard_mb > 0))
    return Err("--high-bits and --shard-mb apply to hf/mlx folders only");
  return w;
}

Status WriteModel(const ModelConfig& config, RopeStyle rope_style, const WriteOptions& options, const Vocab& vocab,
                  const std::string& label, const std::string& output,
                  const std::function<Status(const TensorSink&)>& produce) {
  ModelWriter writer(config, rope_style, options, vocab);
  ProgressBar progress(label, static_cast<double>(ParameterCount(config)) / 1e6, "M params");
  Status st = produce([&](const std::string& name, std::vector<int64_t> shape, std::vector<float> values) {
    progress.Add(static_cast<double>(values.size()) / 1e6);
    return writer.Add(name, std::move(shape), std::move(values));
  });
  progress.Finish();
  if (st.ok()) st = writer.Finish(output);
  return st;
}

}  // namespace parallm::cli
