// CPU feature detection and the instruction-set path the kernels dispatch to; tests force each path.
#pragma once

#include <string_view>

namespace parallm {

enum class IsaPath {
  kScalar,   // the reference twins
  kAvx2,     // AVX2 + FMA + F16C (int8 dot via maddubs)
  kAvxVnni,  // AVX2 + AVX-VNNI (vpdpbusd on 256-bit)
  kAvx512,   // AVX-512 F/BW/VL + VNNI (vpdpbusd on 512-bit)
  kNeon,     // ARM64 NEON + dotprod
  kAmx,      // AVX-512 plus AMX-INT8 tiles for batched int8 products (reads AVX-512's packed weights)
};

std::string_view IsaName(IsaPath p);
// The best path this CPU supports.
IsaPath BestSupportedIsa();
bool IsIsaSupported(IsaPath p);
// AMX with its bf16 tile multiplies and the AVX-512 bf16 conversions (the bf16 formula's kernel).
bool HasAmxBf16();
// AVX-512 with its bf16 dot products and conversions (AVX512-BF16: AMD Zen 4 and later, Intel Cooper Lake and later).
bool HasAvx512Bf16();
// The path kernels use now: BestSupportedIsa() unless forced (tests; env PARALLM_ISA=scalar|avx2|avxvnni|avx512|amx).
IsaPath ActiveIsa();
// Forces a path for this process (must be supported); used by tests to check every compiled path.
void ForceIsa(IsaPath p);

}  // namespace parallm
