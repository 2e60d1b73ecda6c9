// DType table: names, block shapes and GGML ids.
#include "tensor/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include "util/check.h"

namespace parallm {
namespace {

constexpr std::array<DTypeInfo, 15> kInfos = {{
    {"f32", 1, 4, true, false},
    {"f16", 1, 2, true, false},
    {"bf16", 1, 2, true, false},
    {"f64", 1, 8, false, false},
    {"i8", 1, 1, false, false},
    {"u8", 1, 1, false, false},
    {"i16", 1, 2, false, false},
    {"i32", 1, 4, false, false},
    {"i64", 1, 8, false, false},
    {"u32", 1, 4, false, false},
    {"bool", 1, 1, false, false},
    {"q8_0", 32, 34, false, true},
    {"q4_0", 32, 18, false, true},
    {"q4_k", 256, 144, false, true},
    {"q6_k", 256, 210, false, true},
}};

struct GgmlId {
  uint32_t id;
  DType dtype;
};
// ggml.h: F32=0 F16=1 Q4_0=2 Q8_0=8 Q4_K=12 Q6_K=14 I8=24 I16=25 I32=26 I64=27 F64=28 BF16=30
constexpr GgmlId kGgmlIds[] = {
    {0, DType::kF32},  {1, DType::kF16},  {2, DType::kQ4_0},  {8, DType::kQ8_0},  {12, DType::kQ4_K}, {14, DType::kQ6_K},
    {24, DType::kI8},  {25, DType::kI16}, {26, DType::kI32}, {27, DType::kI64}, {28, DType::kF64},  {30, DType::kBF16},
};

}  // namespace

const DTypeInfo& Info(DType t) {
  size_t i = static_cast<size_t>(t);
  PARALLM_CHECK(i < kInfos.size());
  return kInfos[i];
}

size_t RowBytes(DType t, int64_t n) {
  const DTypeInfo& info = Info(t);
  PARALLM_CHECK(n % info.block_elements == 0);
  return static_cast<size_t>(n / info.block_elements) * info.block_bytes;
}

std::optional<DType> DTypeFromGgmlType(uint32_t ggml_type) {
  for (const GgmlId& g : kGgmlIds)
    if (g.id == ggml_type) return g.dtype;
  return std::nullopt;
}

std::optional<uint32_t> GgmlTypeOf(DType t) {
  for (const GgmlId& g : kGgmlIds)
    if (g.dtype == t) return g.id;
  return std::nullopt;
}

std::optional<DType> ParseDType(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (size_t i = 0; i < kInfos.size(); ++i)
    if (kInfos[i].name == lower) return static_cast<DType>(i);
  return std::nullopt;
}

}  // namespace parallm
