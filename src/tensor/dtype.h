// DType: every element and block type parallm stores, with its GGUF id, block shape and size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace parallm {

// Plain element types and GGML block-quantized types. MLX affine quantization is not a DType of its own:
// its packed codes are U32 tensors with .scales/.biases beside them (see tensor/mlx_affine.h).
enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF64,
  kI8,
  kU8,
  kI16,
  kI32,
  kI64,
  kU32,
  kBool,
  kQ8_0,  // blocks of 32: f16 scale + 32 int8
  kQ4_0,  // blocks of 32: f16 scale + 16 bytes of 4-bit codes, value = (q - 8) * d
  kQ4_K,  // super-blocks of 256: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of codes
  kQ6_K,  // super-blocks of 256: 128 bytes low 4 bits, 64 bytes high 2 bits, 16 int8 scales, f16 d
};

struct DTypeInfo {
  std::string_view name;     // "f32", "q8_0", ...
  int64_t block_elements;    // 1 for plain types, 32 or 256 for block types
  size_t block_bytes;        // bytes per block (= element size for plain types)
  bool is_float;             // usable as weights by the float kernels
  bool is_block_quantized;   // GGML block type
};

const DTypeInfo& Info(DType t);
inline std::string_view Name(DType t) { return Info(t).name; }

// Bytes taken by `n` consecutive elements; `n` must be a multiple of the block size.
size_t RowBytes(DType t, int64_t n);

// GGML type ids used in GGUF tensor infos (ggml.h `enum ggml_type`).
std::optional<DType> DTypeFromGgmlType(uint32_t ggml_type);
std::optional<uint32_t> GgmlTypeOf(DType t);
// Parses "f32", "F16", "bf16", "q8_0", "Q4_K", ... as written by users and safetensors headers ("F32", "BF16", "U32").
std::optional<DType> ParseDType(std::string_view name);

}  // namespace parallm
