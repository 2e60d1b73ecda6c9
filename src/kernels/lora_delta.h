// The two small products of a LoRA update over one adapter's tokens (Punica's "shrink" and "expand"):
// u = x A^T (rank values per token) and y += scale * u B^T, reading the tokens' rows in place by index (no gather).
//
// Why dedicated kernels: the rank is small (8-64), so B's rows are short. As a MatMul, every output of u B^T is a
// 16-float dot product followed by a horizontal sum, and the sums cost more than the products. Expand instead reads
// B transposed ([rank, out], `bt`) and accumulates W outputs per vector register, one fused multiply-add per rank
// step, no horizontal sum at all. Shrink keeps the long dot products (x against A's rows, `in` values each) with
// tiles of tokens x rank rows sharing their loads.
//
// Batch invariance: every u[k, j] and y[rows[k], o] is computed with the same operations in the same order whatever
// n, the tiles, the split of [j0, j1) / [o0, o1) into tasks or the thread; the order depends on the vector width W
// alone (16: AVX-512, 8: AVX2 + FMA, 4: baseline x86-64 and ARM64, chosen at first use).
#pragma once

#include <cstdint>

namespace parallm {

struct LoraShrinkArgs {
  const float* a = nullptr;  // [rank, in_dim] row-major
  int64_t in_dim = 0;
  const float* x = nullptr;  // token rows, x_stride floats apart
  int64_t x_stride = 0;
  const int32_t* rows = nullptr;  // [n]: the row of x of each of the adapter's tokens
  int64_t n = 0;
  float* u = nullptr;  // [n, u_stride]
  int64_t u_stride = 0;
};
// u[k, j] = sum_c x[rows[k], c] * a[j, c] for k in [0, n), j in [j0, j1).
void LoraShrink(const LoraShrinkArgs& s, int64_t j0, int64_t j1);

struct LoraExpandArgs {
  const float* bt = nullptr;  // [rank, out_dim] row-major: B transposed
  int64_t rank = 0, out_dim = 0;
  const float* u = nullptr;  // [n, u_stride], the first `rank` values of each row used
  int64_t u_stride = 0;
  const int32_t* rows = nullptr;  // [n]: the row of y of each token
  int64_t n = 0;
  float scale = 0;
  float* y = nullptr;  // token rows, y_stride floats apart
  int64_t y_stride = 0;
};
// y[rows[k], o] += scale * sum_j u[k, j] * bt[j, o] for k in [0, n), o in [o0, o1). Rows must be distinct.
void LoraExpand(const LoraExpandArgs& e, int64_t o0, int64_t o1);

// For tests and benchmarks: the lanes in use (16, 8 or 4) and a switch to another width this CPU runs (0: the
// best); false if it cannot. Not while kernels are running.
int LoraKernelLanes();
bool SetLoraKernelLanes(int lanes);

namespace ref {
// The scalar twins: plain sums in index order, no fused multiply-add.
void LoraShrink(const LoraShrinkArgs& s, int64_t j0, int64_t j1);
void LoraExpand(const LoraExpandArgs& e, int64_t o0, int64_t o1);
}  // namespace ref

}  // namespace parallm
