// The AVX2 + FMA + F16C (int8 dots via maddubs + madd) MatMul path: the 256-bit kernels of matmul_x86_256-inl.h
// compiled for this instruction set.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "kernels/matmul_internal.h"
#include "tensor/quant.h"
#include "util/check.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace parallm::mm {
namespace {

#define PARALLM_X86_VNNI 0
#include "kernels/cpu/matmul_x86_256-inl.h"

}  // namespace

const IsaKernels* Avx2Kernels() { return &kKernels; }

}  // namespace parallm::mm

#pragma GCC pop_options
