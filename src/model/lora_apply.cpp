// LoraBatch: the per-adapter low-rank updates of one step.
#include "model/lora_apply.h"

#include <algorithm>

#include "kernels/matmul.h"
#include "util/check.h"

namespace parallm {

void LoraBatch::Build(const ForwardBatch& batch) {
  groups_.clear();
  for (const SequenceSlice& seq : batch.sequences) {
    if (seq.adapter == nullptr) continue;
    auto it = std::find_if(groups_.begin(), groups_.end(), [&](const Group& g) { return g.adapter == seq.adapter; });
    if (it == groups_.end()) {
      groups_.push_back(Group{seq.adapter, {}});
      it = groups_.end() - 1;
    }
    for (int32_t i = 0; i < seq.num_tokens; ++i) it->tokens.push_back(seq.token_begin + i);
  }
}

void LoraBatch::Apply(int layer, LoraTarget target, const float* in, float* out, ThreadPool* pool) {
  // Per adapter: its tokens' rows gathered, U = X A^T and Y = U B^T through the batch-invariant MatMul (SIMD f32
  // kernels; every (token, row) value is independent of how many tokens there are), then y += scale * Y. Each
  // adapter's A and B are read once per step for all of its tokens.
  std::vector<std::pair<const Group*, const LoraWeights*>> work;
  for (const Group& g : groups_) {
    PARALLM_CHECK(layer < static_cast<int>(g.adapter->layers.size()));
    if (const LoraWeights* w = g.adapter->Find(layer, target)) work.emplace_back(&g, w);
  }
  if (work.empty()) return;
  const int n_threads = pool != nullptr ? pool->num_threads() : 1;
  if (static_cast<int>(scratch_.size()) < 3 * n_threads) scratch_.resize(static_cast<size_t>(3 * n_threads));
  auto run = [&](size_t i, int thread, ThreadPool* inner) {
    const auto [g, w] = work[i];
    const int64_t r = w->rank, in_dim = static_cast<int64_t>(w->a.size()) / r;
    const int64_t out_dim = static_cast<int64_t>(w->b.size()) / r;
    const int64_t n = static_cast<int64_t>(g->tokens.size());
    // scratch_[3 * thread + 0..2]: this thread's gathered inputs [n, in], U [n, r] and Y [n, out].
    std::vector<float>& x = scratch_[static_cast<size_t>(3 * thread)];
    std::vector<float>& u = scratch_[static_cast<size_t>(3 * thread + 1)];
    std::vector<float>& y = scratch_[static_cast<size_t>(3 * thread + 2)];
    x.resize(static_cast<size_t>(n * in_dim));
    u.resize(static_cast<size_t>(n * r));
    y.resize(static_cast<size_t>(n * out_dim));
    for (int64_t k = 0; k < n; ++k)
      std::copy_n(in + g->tokens[static_cast<size_t>(k)] * in_dim, in_dim, x.data() + k * in_dim);
    MatrixView a;
    a.dtype = DType::kF32;
    a.rows = r;
    a.cols = in_dim;
    a.data = reinterpret_cast<const uint8_t*>(w->a.data());
    a.row_bytes = static_cast<size_t>(in_dim) * sizeof(float);
    MatrixView b = a;
    b.rows = out_dim;
    b.cols = r;
    b.data = reinterpret_cast<const uint8_t*>(w->b.data());
    b.row_bytes = static_cast<size_t>(r) * sizeof(float);
    MatMul(a, x.data(), n, u.data(), r, inner);
    MatMul(b, u.data(), n, y.data(), out_dim, inner);
    for (int64_t k = 0; k < n; ++k) {
      float* dst = out + g->tokens[static_cast<size_t>(k)] * out_dim;
      const float* src = y.data() + k * out_dim;
      for (int64_t o = 0; o < out_dim; ++o) dst[o] += w->scale * src[o];
    }
  };
  // One adapter: its products use the whole pool. Several: one adapter per task (its products on one thread).
  if (work.size() == 1 || pool == nullptr) {
    for (size_t i = 0; i < work.size(); ++i) run(i, 0, pool);
  } else {
    pool->ParallelFor(static_cast<int64_t>(work.size()), [&](int64_t i, int thread) {
      run(static_cast<size_t>(i), thread, nullptr);
    });
  }
}

}  // namespace parallm
