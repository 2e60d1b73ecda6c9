// Elementwise and row-wise kernels of the transformer forward pass (f32 activations).
// Each has one implementation whose result does not depend on the batch size (batch invariance);
// SIMD versions, when added, keep a scalar twin in ref:: with the same signature.
#pragma once

#include <cstdint>
#include <span>

namespace parallm {

// y[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], for each of `n_rows` rows of `dim` values. y may alias x.
void RmsNorm(const float* x, const float* w, float eps, int64_t n_rows, int64_t dim, float* y);

// RoPE pair layouts: kInterleaved rotates (x[2i], x[2i+1]) (llama2.c, GGUF "llama"),
// kHalf rotates (x[i], x[i + d/2]) (Hugging Face rotate_half, GGUF qwen2/qwen3 "neox").
enum class RopeStyle { kInterleaved, kHalf };

// Per-dimension-pair inverse frequencies theta^(-2i/d) / freq_factors[i] (freq_factors may be null: all 1;
// Llama-3 scaling is expressed as such divisors, as in GGUF rope_freqs.weight).
void RopeInvFreqs(int rotary_dim, float theta, const float* freq_factors, float* inv_freq /* rotary_dim/2 */);

// RoPE's angles at `position`: cos_sin[i] = cos(position * inv_freq[i]) and cos_sin[rotary_dim / 2 + i] = its sin,
// for i < rotary_dim / 2, each angle in double (positions reach 1e5+ and an f32 angle's error grows with them). A
// step computes them once per token, not once per layer.
void RopeCosSin(int rotary_dim, int64_t position, const float* inv_freq, float* cos_sin /* rotary_dim */);

// Rotates each of the `n_q_heads` query heads and `n_k_heads` key heads (head_dim apart; k may be null) of one
// token by the angles of RopeCosSin, in place.
void ApplyRope(float* q, int n_q_heads, float* k, int n_k_heads, int head_dim, int rotary_dim, const float* cos_sin,
               RopeStyle style);

// out[i] = silu(gate[i]) * up[i]; out may alias gate or up. Vectorized with a polynomial exp (kernels/fast_exp.h).
void SiluMul(const float* gate, const float* up, int64_t n, float* out);

// out[i] = gelu_tanh(gate[i]) * up[i] (GeGLU with the tanh approximation: Gemma's gelu_pytorch_tanh); out may
// alias gate or up. Vectorized like SiluMul.
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);

// Soft-capping in place: x[i] = cap * tanh(x[i] / cap) (Gemma 2's final logits).
void SoftCap(float* x, int64_t n, float cap);

// Continues the plain scan for the largest value over x[0, n): each value strictly greater than *best replaces it
// and *at becomes base + its index, so ties keep the earlier index and NaNs are never taken (a NaN *best is never
// replaced). Consecutive calls over the parts of a row give what one call over the whole row gives.
void ScanMax(const float* x, int64_t n, int64_t base, float* best, int64_t* at);

// The index of the largest logit, ties to the lowest (greedy decoding is deterministic): the plain scan from index 0,
// whose NaN is never replaced.
int32_t ArgMax(std::span<const float> logits);

// In-place softmax of n values.
void Softmax(float* x, int64_t n);

// out[i] = ((0 + w[0] * rows[0][i]) + w[1] * rows[1][i]) + ... over n_rows rows, a product then a sum per term in
// that order (a mixture-of-experts token's combine: its experts' outputs in rank order, then the shared expert).
// Vectorized 16 values at a time, the same operations per value as the scalar twin.
void WeightedRowSum(const float* const* rows, const float* w, int n_rows, int64_t n, float* out);

// x[i] += y[i] for i < n (a residual add, a bias): vectorized 16 values at a time. x and y do not overlap.
void AddInPlace(float* x, const float* y, int64_t n);

// out[i] = x[i] > 0 ? x[i]^2 : 0 (Nemotron-H's ungated MLPs and experts), vectorized 16 values at a time; out may be x.
void ReluSquared(const float* x, int64_t n, float* out);

namespace ref {
// SiluMul with std::exp, one value at a time.
void SiluMul(const float* gate, const float* up, int64_t n, float* out);
// GeluTanhMul in double with std::exp.
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);
// WeightedRowSum one value at a time.
void WeightedRowSum(const float* const* rows, const float* w, int n_rows, int64_t n, float* out);
}  // namespace ref

}  // namespace parallm
