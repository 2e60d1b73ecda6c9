// The AVX2 + AVX-VNNI (int8 dots via vpdpbusd on ymm) MatMul path: the 256-bit kernels of matmul_x86_256-inl.h
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
#pragma GCC target("avx2,fma,f16c,avxvnni")

namespace parallm::mm {
namespace {

#define PARALLM_X86_VNNI 1
#include "kernels/cpu/matmul_x86_256-inl.h"

}  // namespace

const IsaKernels* AvxVnniKernels() { return &kKernels; }

}  // namespace parallm::mm

#pragma GCC pop_options
