// The chunked SSD scan: per chunk and group one C·Bᵀ product, then per head three more (the masked intra-chunk
// product with x, the incoming state read by C, the state update from x and B), all through one small register-blocked
// product whose every output element sums its terms in ascending order, so a chunk's bits depend on its inputs only.
#include "kernels/ssm_chunked.h"
#include "kernels/target_clones.h"

#include <algorithm>
#include <vector>

#include "util/check.h"

namespace parallm {
namespace {

// out[m][j] = sum_k a[m][k] * b[k][j] for m < M, j < J, k ascending (the same order in the register blocks and at
// the edges). `lower`: a[m][k] == 0 for k > m, so each block of rows stops at its last row's diagonal.
PARALLM_CLONES void Product(int64_t M, int64_t J, int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb,
                            float* out, int64_t ldo, bool lower) {
  constexpr int64_t kRows = 4, kCols = 16;
  for (int64_t m0 = 0; m0 < M; m0 += kRows) {
    const int64_t rows = std::min(kRows, M - m0);
    const int64_t kend = lower ? std::min(K, m0 + rows) : K;
    for (int64_t j0 = 0; j0 < J; j0 += kCols) {
      const int64_t cols = std::min(kCols, J - j0);
      if (rows == kRows && cols == kCols) {
        float acc[kRows][kCols] = {};
        for (int64_t k = 0; k < kend; ++k) {
          const float* bk = b + k * ldb + j0;
          for (int64_t r = 0; r < kRows; ++r) {
            const float av = a[(m0 + r) * lda + k];
            for (int64_t l = 0; l < kCols; ++l) acc[r][l] += av * bk[l];
          }
        }
        for (int64_t r = 0; r < kRows; ++r)
          for (int64_t l = 0; l < kCols; ++l) out[(m0 + r) * ldo + j0 + l] = acc[r][l];
      } else {
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t l = 0; l < cols; ++l) {
            float v = 0;
            for (int64_t k = 0; k < kend; ++k) v += a[(m0 + r) * lda + k] * b[k * ldb + j0 + l];
            out[(m0 + r) * ldo + j0 + l] = v;
          }
      }
    }
  }
}

// The buffers of one call, reused by the thread's later calls.
struct ChunkScratch {
  std::vector<float> bt, cb, w, yc, ys, st, xt, snew, dt, da, decay;
};

}  // namespace

void SsmChunkedScan(const SsmScanShape& sh, int head_begin, int head_end, int chunk, const float* x, const float* B,
                    const float* C, int64_t xbc_stride, const float* dt_raw, int64_t dt_stride, int64_t n,
                    const float* dt_bias, const float* A, const float* D, float* ssm, float* y, int64_t y_stride) {
  PARALLM_CHECK(chunk > 0 && n % chunk == 0);
  const int64_t Q = chunk, P = sh.head_dim, N = sh.state, per_group = sh.heads / sh.groups;
  thread_local ChunkScratch s;
  auto size = [](std::vector<float>& v, int64_t count) { v.resize(static_cast<size_t>(count)); };
  size(s.bt, N * Q), size(s.cb, Q * Q), size(s.w, Q * Q), size(s.yc, Q * P), size(s.ys, Q * P), size(s.st, N * P);
  size(s.xt, P * Q), size(s.snew, P * N), size(s.dt, Q), size(s.da, Q), size(s.decay, Q);
  for (int64_t t0 = 0; t0 < n; t0 += Q) {
    for (int64_t g = head_begin / per_group; g * per_group < head_end; ++g) {
      const float* bg = B + t0 * xbc_stride + g * N;
      const float* cg = C + t0 * xbc_stride + g * N;
      // cb[t][s] = C[t] · B[s], shared by the group's heads.
      for (int64_t q = 0; q < Q; ++q)
        for (int64_t i = 0; i < N; ++i) s.bt[static_cast<size_t>(i * Q + q)] = bg[q * xbc_stride + i];
      Product(Q, Q, N, cg, xbc_stride, s.bt.data(), Q, s.cb.data(), Q, false);
      const int64_t h_end = std::min<int64_t>(head_end, (g + 1) * per_group);
      for (int64_t h = std::max<int64_t>(head_begin, g * per_group); h < h_end; ++h) {
        float prod = 1;
        for (int64_t q = 0; q < Q; ++q) {
          const float dt = SsmStepSize(dt_raw[(t0 + q) * dt_stride + h], dt_bias[h], sh.dt_min);
          s.dt[static_cast<size_t>(q)] = dt;
          s.da[static_cast<size_t>(q)] = std::exp(dt * A[h]);
          prod *= s.da[static_cast<size_t>(q)];
          s.decay[static_cast<size_t>(q)] = prod;  // dA[0]···dA[q]: how much of the incoming state reaches q
        }
        // w[t][s] = cb[t][s] L[t][s] dt[s] below the diagonal and on it, zero above; L built right to left.
        for (int64_t t = 0; t < Q; ++t) {
          float* wt = s.w.data() + t * Q;
          float l = 1;
          for (int64_t u = t; u >= 0; --u) {
            wt[u] = s.cb[static_cast<size_t>(t * Q + u)] * l * s.dt[static_cast<size_t>(u)];
            l *= s.da[static_cast<size_t>(u)];
          }
          std::fill(wt + t + 1, wt + Q, 0.0f);
        }
        const float* xh = x + t0 * xbc_stride + h * P;
        float* sh_state = ssm + h * P * N;
        Product(Q, P, Q, s.w.data(), Q, xh, xbc_stride, s.yc.data(), P, true);
        for (int64_t p = 0; p < P; ++p)
          for (int64_t i = 0; i < N; ++i) s.st[static_cast<size_t>(i * P + p)] = sh_state[p * N + i];
        Product(Q, P, N, cg, xbc_stride, s.st.data(), P, s.ys.data(), P, false);
        for (int64_t t = 0; t < Q; ++t) {
          const float* xt = xh + t * xbc_stride;
          float* yt = y + (t0 + t) * y_stride + h * P;
          const float decay = s.decay[static_cast<size_t>(t)];
          const float* yc = s.yc.data() + t * P;
          const float* ys = s.ys.data() + t * P;
          for (int64_t p = 0; p < P; ++p) yt[p] = (yc[p] + decay * ys[p]) + D[h] * xt[p];
        }
        // The state after the chunk: xt[p][u] = L[Q-1][u] dt[u] x[u][p], times B.
        float l = 1;
        for (int64_t u = Q - 1; u >= 0; --u) {
          const float coef = l * s.dt[static_cast<size_t>(u)];
          for (int64_t p = 0; p < P; ++p) s.xt[static_cast<size_t>(p * Q + u)] = coef * xh[u * xbc_stride + p];
          l *= s.da[static_cast<size_t>(u)];
        }
        Product(P, N, Q, s.xt.data(), Q, bg, xbc_stride, s.snew.data(), N, false);
        const float total = s.decay[static_cast<size_t>(Q - 1)];
        for (int64_t e = 0; e < P * N; ++e) sh_state[e] = total * sh_state[e] + s.snew[static_cast<size_t>(e)];
      }
    }
  }
}

namespace ref {

void SsmChunkedScan(const SsmScanShape& sh, int head_begin, int head_end, int chunk, const float* x, const float* B,
                    const float* C, int64_t xbc_stride, const float* dt_raw, int64_t dt_stride, int64_t n,
                    const float* dt_bias, const float* A, const float* D, float* ssm, float* y, int64_t y_stride) {
  PARALLM_CHECK(chunk > 0 && n % chunk == 0);
  const int64_t Q = chunk, P = sh.head_dim, N = sh.state;
  std::vector<float> dt(static_cast<size_t>(Q)), da(static_cast<size_t>(Q));
  std::vector<float> next(static_cast<size_t>(P * N));
  for (int64_t t0 = 0; t0 < n; t0 += Q) {
    for (int64_t h = head_begin; h < head_end; ++h) {
      const int64_t g = h / (sh.heads / sh.groups);
      for (int64_t q = 0; q < Q; ++q) {
        float v = dt_raw[(t0 + q) * dt_stride + h] + dt_bias[h];
        float d = v > 20.0f ? v : std::log1p(std::exp(v));
        if (d < sh.dt_min) d = sh.dt_min;
        dt[static_cast<size_t>(q)] = d;
        da[static_cast<size_t>(q)] = std::exp(d * A[h]);
      }
      auto b = [&](int64_t q, int64_t i) { return B[(t0 + q) * xbc_stride + g * N + i]; };
      auto c = [&](int64_t q, int64_t i) { return C[(t0 + q) * xbc_stride + g * N + i]; };
      auto xv = [&](int64_t q, int64_t p) { return x[(t0 + q) * xbc_stride + h * P + p]; };
      auto decay = [&](int64_t from, int64_t to) {  // dA[from]···dA[to] (1 when from > to)
        float v = 1;
        for (int64_t r = from; r <= to; ++r) v *= da[static_cast<size_t>(r)];
        return v;
      };
      float* state = ssm + h * P * N;
      for (int64_t t = 0; t < Q; ++t)
        for (int64_t p = 0; p < P; ++p) {
          float intra = 0;
          for (int64_t u = 0; u <= t; ++u) {
            float cb = 0;
            for (int64_t i = 0; i < N; ++i) cb += c(t, i) * b(u, i);
            intra += cb * decay(u + 1, t) * dt[static_cast<size_t>(u)] * xv(u, p);
          }
          float carried = 0;
          for (int64_t i = 0; i < N; ++i) carried += state[p * N + i] * c(t, i);
          y[(t0 + t) * y_stride + h * P + p] = intra + decay(0, t) * carried + D[h] * xv(t, p);
        }
      for (int64_t p = 0; p < P; ++p)
        for (int64_t i = 0; i < N; ++i) {
          float v = decay(0, Q - 1) * state[p * N + i];
          for (int64_t u = 0; u < Q; ++u) v += decay(u + 1, Q - 1) * dt[static_cast<size_t>(u)] * xv(u, p) * b(u, i);
          next[static_cast<size_t>(p * N + i)] = v;
        }
      std::copy(next.begin(), next.end(), state);
    }
  }
}

}  // namespace ref
}  // namespace parallm
