// LoRA shrink and expand: the kernel (lora_delta_simd-inl.h) once per instruction set, the pick at first use, and
// the scalar twins.
#include "kernels/lora_delta.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu_features.h"

namespace parallm {
namespace {

#define PARALLM_SIMD_KERNEL "kernels/lora_delta_simd-inl.h"
#include "kernels/simd_targets-inl.h"
#undef PARALLM_SIMD_KERNEL

struct Kernels {
  int lanes;
  void (*shrink)(const LoraShrinkArgs&, int64_t, int64_t);
  void (*expand)(const LoraExpandArgs&, int64_t, int64_t);
};

constexpr Kernels kBaseline{4, baseline::Shrink, baseline::Expand};

// The kernels for `lanes`, or null where this build or CPU lacks them.
const Kernels* KernelsFor(int lanes) {
  if (!SimdLanesRun(lanes)) return nullptr;
#if defined(__x86_64__)
  static constexpr Kernels kAvx512{16, avx512::Shrink, avx512::Expand};
  static constexpr Kernels kAvx2{8, avx2::Shrink, avx2::Expand};
  if (lanes == 16) return &kAvx512;
  if (lanes == 8) return &kAvx2;
#endif
  return &kBaseline;
}

const Kernels* Best() {
  for (int lanes : {16, 8})
    if (const Kernels* k = KernelsFor(lanes)) return k;
  return &kBaseline;
}

// Chosen at first use; only tests and benchmarks change it (SetLoraKernelLanes).
std::atomic<const Kernels*>& Current() {
  static std::atomic<const Kernels*> k{Best()};
  return k;
}

}  // namespace

void LoraShrink(const LoraShrinkArgs& s, int64_t j0, int64_t j1) {
  if (s.n > 0 && j0 < j1) Current().load(std::memory_order_relaxed)->shrink(s, j0, j1);
}

void LoraExpand(const LoraExpandArgs& e, int64_t o0, int64_t o1) {
  if (e.n > 0 && o0 < o1) Current().load(std::memory_order_relaxed)->expand(e, o0, o1);
}

int LoraKernelLanes() { return Current().load()->lanes; }

bool SetLoraKernelLanes(int lanes) {
  const Kernels* k = lanes == 0 ? Best() : KernelsFor(lanes);
  if (k == nullptr) return false;
  Current().store(k);
  return true;
}

namespace ref {

void LoraShrink(const LoraShrinkArgs& s, int64_t j0, int64_t j1) {
  for (int64_t k = 0; k < s.n; ++k) {
    const float* x = s.x + static_cast<int64_t>(s.rows[k]) * s.x_stride;
    for (int64_t j = j0; j < j1; ++j) {
      const float* a = s.a + j * s.in_dim;
      float sum = 0;
      for (int64_t c = 0; c < s.in_dim; ++c) sum += x[c] * a[c];
      s.u[k * s.u_stride + j] = sum;
    }
  }
}

void LoraExpand(const LoraExpandArgs& e, int64_t o0, int64_t o1) {
  for (int64_t k = 0; k < e.n; ++k) {
    float* y = e.y + static_cast<int64_t>(e.rows[k]) * e.y_stride;
    const float* u = e.u + k * e.u_stride;
    for (int64_t o = o0; o < o1; ++o) {
      float sum = 0;
      for (int64_t j = 0; j < e.rank; ++j) sum += u[j] * e.bt[j * e.out_dim + o];
      y[o] += e.scale * sum;
    }
  }
}

}  // namespace ref
}  // namespace parallm
