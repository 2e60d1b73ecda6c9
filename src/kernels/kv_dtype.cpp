// KvDtype: element conversions for the KV cache (the kernels' fast paths decode the same bits with vector loads).
#include "kernels/kv_dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/fp16.h"

namespace parallm {

size_t KvElementBytes(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32: return sizeof(float);
    case KvDtype::kBf16:
    case KvDtype::kF16: return sizeof(uint16_t);
    case KvDtype::kInt8: return sizeof(int8_t);
  }
  return sizeof(float);
}

std::string_view KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32: return "f32";
    case KvDtype::kBf16: return "bf16";
    case KvDtype::kF16: return "f16";
    case KvDtype::kInt8: return "int8";
  }
  return "f32";
}

std::optional<KvDtype> ParseKvDtype(std::string_view name) {
  if (name == "auto" || name == "float32" || name == "f32") return KvDtype::kF32;
  if (name == "bfloat16" || name == "bf16") return KvDtype::kBf16;
  if (name == "float16" || name == "f16" || name == "half") return KvDtype::kF16;
  if (name == "int8") return KvDtype::kInt8;
  return std::nullopt;
}

uint16_t FloatToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if (std::isnan(x)) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet, whatever the low bits held
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

void EncodeKvRow(KvDtype dtype, const float* x, int n, void* dst, float* scale) {
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case KvDtype::kBf16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int i = 0; i < n; ++i) out[i] = FloatToBf16(x[i]);
      return;
    }
    case KvDtype::kF16: {
      constexpr float kMax = 65504.0f;  // the largest finite f16
      auto* out = static_cast<uint16_t*>(dst);
      for (int i = 0; i < n; ++i) out[i] = F32ToF16(std::isnan(x[i]) ? x[i] : std::clamp(x[i], -kMax, kMax));
      return;
    }
    case KvDtype::kInt8: {
      float amax = 0;
      for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
      const float s = amax / 127.0f;
      const float inv = s > 0 ? 1.0f / s : 0.0f;
      auto* out = static_cast<int8_t*>(dst);
      for (int i = 0; i < n; ++i)
        out[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inv), -127.0f, 127.0f));
      *scale = s;
      return;
    }
  }
}

float DecodeKvElement(KvDtype dtype, const void* row, int i, float scale) {
  switch (dtype) {
    case KvDtype::kF32: return static_cast<const float*>(row)[i];
    case KvDtype::kBf16: return Bf16ToFloat(static_cast<const uint16_t*>(row)[i]);
    case KvDtype::kF16: return F16ToF32(static_cast<const uint16_t*>(row)[i]);
    case KvDtype::kInt8: return static_cast<float>(static_cast<const int8_t*>(row)[i]) * scale;
  }
  return 0;
}

}  // namespace parallm
