// GgufValue: typed access to one GGUF metadata value and constructors for the common types.
#include <cstdint>
#include <limits>
#include <utility>

#include "formats/gguf.h"

namespace parallm {

std::optional<int64_t> GgufValue::AsInt() const {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kU16:
    case GgufType::kU32:
    case GgufType::kU64:
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(u);
    case GgufType::kI8:
    case GgufType::kI16:
    case GgufType::kI32:
    case GgufType::kI64:
      return i;
    case GgufType::kBool:
      return b ? 1 : 0;
    default:
      return std::nullopt;
  }
}

std::optional<double> GgufValue::AsFloat() const {
  switch (type) {
    case GgufType::kF32:
    case GgufType::kF64:
      return f;
    case GgufType::kU8:
    case GgufType::kU16:
    case GgufType::kU32:
    case GgufType::kU64:
      return static_cast<double>(u);  // u64 above 2^53 rounds, as any double would
    case GgufType::kI8:
    case GgufType::kI16:
    case GgufType::kI32:
    case GgufType::kI64:
      return static_cast<double>(i);
    default:
      return std::nullopt;
  }
}

GgufValue GgufValue::String(std::string s) {
  GgufValue v;
  v.type = GgufType::kString;
  v.str = std::move(s);
  return v;
}

GgufValue GgufValue::U32(uint32_t x) {
  GgufValue v;
  v.type = GgufType::kU32;
  v.u = x;
  return v;
}

GgufValue GgufValue::I32(int32_t x) {
  GgufValue v;
  v.type = GgufType::kI32;
  v.i = x;
  return v;
}

GgufValue GgufValue::U64(uint64_t x) {
  GgufValue v;
  v.type = GgufType::kU64;
  v.u = x;
  return v;
}

GgufValue GgufValue::F32(float x) {
  GgufValue v;
  v.type = GgufType::kF32;
  v.f = x;
  return v;
}

GgufValue GgufValue::Bool(bool x) {
  GgufValue v;
  v.type = GgufType::kBool;
  v.b = x;
  return v;
}

GgufValue GgufValue::StringArray(const std::vector<std::string>& xs) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = GgufType::kString;
  v.array.reserve(xs.size());
  for (const std::string& s : xs) v.array.push_back(String(s));
  return v;
}

GgufValue GgufValue::F32Array(const std::vector<float>& xs) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = GgufType::kF32;
  v.array.reserve(xs.size());
  for (float x : xs) v.array.push_back(F32(x));
  return v;
}

GgufValue GgufValue::I32Array(const std::vector<int32_t>& xs) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = GgufType::kI32;
  v.array.reserve(xs.size());
  for (int32_t x : xs) v.array.push_back(I32(x));
  return v;
}

}  // namespace parallm
