// Parsing of the output flags shared by make-model and convert (--format/--to, --dtype, --bits, --group-size).
#include "cli/write_options.h"

namespace parallm::cli {

Result<WriteOptions> ParseWriteOptions(const std::string& format, const std::string& dtype, int bits, int group_size) {
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
    if (format == "mlx" && !IsSupportedMlxAffine(w.mlx))
      return Err("--bits {} --group-size {}: MLX affine quantization takes bits 2, 3, 4, 5, 6 or 8 and group size "
                 "32, 64 or 128",
                 bits, group_size);
  } else {
    return Err("--format {} is not one of gguf, hf, mlx", format);
  }
  return w;
}

}  // namespace parallm::cli
