// Instantiates one vector kernel once per instruction set: the file named by PARALLM_SIMD_KERNEL (a kernel's
// -inl.h, written against simd_vec-inl.h) is included in namespaces avx512 (16 lanes), avx2 (8 lanes, x86 only)
// and baseline (4 lanes), each in its own `#pragma GCC target` region (both x86 ones with F16C: the CPUs that have
// AVX2 have it, and SimdLanesRun checks for it). Include it inside the .cpp's anonymous namespace; the .cpp then picks
// among avx512::, avx2:: and baseline:: at run time, where SimdLanesRun says the CPU runs them.

#ifndef PARALLM_SIMD_KERNEL
#error "define PARALLM_SIMD_KERNEL as the kernel's -inl.h path before including simd_targets-inl.h"
#endif

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx512f,f16c")
namespace avx512 {
#define PARALLM_SIMD_LANES 16
#include PARALLM_SIMD_KERNEL
#undef PARALLM_SIMD_LANES
}  // namespace avx512
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace avx2 {
#define PARALLM_SIMD_LANES 8
#include PARALLM_SIMD_KERNEL
#undef PARALLM_SIMD_LANES
}  // namespace avx2
#pragma GCC pop_options
#endif

namespace baseline {
#define PARALLM_SIMD_LANES 4
#include PARALLM_SIMD_KERNEL
#undef PARALLM_SIMD_LANES
}  // namespace baseline

// Whether this CPU runs the instances for `lanes`: 16 and 8 need the x86 targets above (8: MatMul's AVX2 path, the same
// AVX2 + FMA + F16C; the including .cpp includes kernels/cpu_features.h), 4 runs anywhere.
inline bool SimdLanesRun(int lanes) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (lanes == 16) return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("f16c");
  if (lanes == 8) return IsIsaSupported(IsaPath::kAvx2);
#endif
  return lanes == 4;
}
