// Random rows in a storage type: random codes under fixed block scales, 8 random bytes per generator step.
#include "tensor/random_rows.h"

#include <cstring>
#include <vector>

#include "tensor/fp16.h"
#include "tensor/quant.h"
#include "util/check.h"
#include "util/splitmix64.h"

namespace parallm {
namespace {

// SplitMix64, one stream per row, with random bytes.
struct Rng : SplitMix64 {
  void Bytes(uint8_t* out, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const uint64_t v = Next();
      std::memcpy(out + i, &v, 8);
    }
    if (i < n) {
      const uint64_t v = Next();
      std::memcpy(out + i, &v, n - i);
    }
  }
};

}  // namespace

void RandomRows(DType type, int64_t cols, float half_width, uint64_t seed, int64_t row_begin, int64_t row_end,
                uint8_t* out) {
  const size_t row_bytes = RowBytes(type, cols);
  std::vector<float> values;
  for (int64_t r = row_begin; r < row_end; ++r, out += row_bytes) {
    Rng rng{seed ^ (static_cast<uint64_t>(r) * 0xD1B54A32D192ED03ull)};
    switch (type) {
      case DType::kQ8_0: {  // value = d * q, q uniform in [-127, 127] (-128 excluded, as ggml's quantizer never writes it)
        auto* b = reinterpret_cast<BlockQ8_0*>(out);
        const uint16_t d = F32ToF16(half_width / 127.0f);
        for (int64_t i = 0; i < cols / kQK8_0; ++i) {
          b[i].d = d;
          rng.Bytes(reinterpret_cast<uint8_t*>(b[i].qs), sizeof(b[i].qs));
          for (int8_t& q : b[i].qs)
            if (q == -128) q = -127;
        }
        break;
      }
      case DType::kQ4_0: {  // value = d * (q - 8): code 0 (-8d) becomes 8 (0), so values are symmetric in [-7d, 7d]
        auto* b = reinterpret_cast<BlockQ4_0*>(out);
        const uint16_t d = F32ToF16(half_width / 7.0f);
        for (int64_t i = 0; i < cols / kQK4_0; ++i) {
          b[i].d = d;
          rng.Bytes(b[i].qs, sizeof(b[i].qs));
          for (uint8_t& q : b[i].qs) {
            if ((q & 0x0F) == 0) q |= 0x08;
            if ((q & 0xF0) == 0) q |= 0x80;
          }
        }
        break;
      }
      case DType::kQ4_K: {  // every sub-block scale and min 15: value = 15 d q - 15 dmin, q in [0, 15]
        auto* b = reinterpret_cast<BlockQ4_K*>(out);
        const uint16_t d = F32ToF16(2.0f * half_width / 225.0f), dmin = F32ToF16(half_width / 15.0f);
        // ggml get_scale_min_k4 packing of scale = min = 15 (4 bits: the top-2-bit fields stay 0).
        static constexpr uint8_t kScales[12] = {15, 15, 15, 15, 15, 15, 15, 15, 0xFF, 0xFF, 0xFF, 0xFF};
        for (int64_t i = 0; i < cols / kQK_K; ++i) {
          b[i].d = d;
          b[i].dmin = dmin;
          std::memcpy(b[i].scales, kScales, sizeof(kScales));
          rng.Bytes(b[i].qs, sizeof(b[i].qs));
        }
        break;
      }
      default: {  // float types (a conversion) and the rest (a quantizer): from uniform f32 values
        PARALLM_CHECK_MSG(IsWritableType(type), "RandomRows: unsupported type");
        values.resize(static_cast<size_t>(cols));
        for (float& v : values) v = half_width * rng.Uniform();
        QuantizeRow(type, values.data(), out, cols);
      }
    }
  }
}

}  // namespace parallm
