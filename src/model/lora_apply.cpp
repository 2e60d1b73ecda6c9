// LoraBatch: the per-adapter low-rank updates of one step.
#include "model/lora_apply.h"

#include <algorithm>

#include "util/check.h"

namespace parallm {
namespace {

// Dot product in a fixed order: eight interleaved partial sums (vectorizable), then the tail, then the
// partial sums pairwise. The order depends on n only, never on the batch.
float Dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  for (int k = 0; i < n; ++i, ++k) acc[k] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace

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
  struct Task {
    const LoraWeights* w;
    int32_t token;
  };
  std::vector<Task> tasks;
  int64_t work = 0;
  for (const Group& g : groups_) {
    PARALLM_CHECK(layer < static_cast<int>(g.adapter->layers.size()));
    const LoraWeights* w = g.adapter->Find(layer, target);
    if (w == nullptr) continue;
    for (int32_t t : g.tokens) tasks.push_back(Task{w, t});
    work += static_cast<int64_t>(g.tokens.size()) * w->rank * static_cast<int64_t>(w->a.size() / w->rank + w->b.size() / w->rank);
  }
  if (tasks.empty()) return;
  const int n_threads = pool != nullptr ? pool->num_threads() : 1;
  if (static_cast<int>(scratch_.size()) < n_threads) scratch_.resize(static_cast<size_t>(n_threads));
  auto run = [&](int64_t i, int thread) {
    const Task& task = tasks[static_cast<size_t>(i)];
    const LoraWeights& w = *task.w;
    const int64_t r = w.rank, in_dim = static_cast<int64_t>(w.a.size()) / r, out_dim = static_cast<int64_t>(w.b.size()) / r;
    std::vector<float>& u = scratch_[static_cast<size_t>(thread)];
    u.resize(static_cast<size_t>(r));
    const float* x = in + task.token * in_dim;
    for (int64_t j = 0; j < r; ++j) u[static_cast<size_t>(j)] = Dot(w.a.data() + j * in_dim, x, in_dim);
    float* y = out + task.token * out_dim;
    for (int64_t o = 0; o < out_dim; ++o) y[o] += w.scale * Dot(w.b.data() + o * r, u.data(), r);
  };
  // One token per task: a token's update is the same on any thread. Small steps stay on the calling thread.
  if (pool != nullptr && work >= (1 << 16)) {
    pool->ParallelFor(static_cast<int64_t>(tasks.size()), run);
  } else {
    for (size_t i = 0; i < tasks.size(); ++i) run(static_cast<int64_t>(i), 0);
  }
}

}  // namespace parallm
