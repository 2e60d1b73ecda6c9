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
  // Each adapter's weights are read once per step for all of its tokens (row by row, the row staying in cache while
  // every token of the group uses it), not once per token: U = A x for the group's tokens, then y += scale * B U.
  // Every value is one Dot in a fixed order, whatever the group's size or the split: batch invariant.
  struct Work {
    const LoraWeights* w;
    const Group* g;
    size_t u_offset;  // where the group's U [tokens, rank] starts in scratch_[0]
  };
  std::vector<Work> work;
  size_t u_size = 0;
  for (const Group& g : groups_) {
    PARALLM_CHECK(layer < static_cast<int>(g.adapter->layers.size()));
    const LoraWeights* w = g.adapter->Find(layer, target);
    if (w == nullptr) continue;
    work.push_back(Work{w, &g, u_size});
    u_size += g.tokens.size() * static_cast<size_t>(w->rank);
  }
  if (work.empty()) return;
  // U of every adapted token lives in scratch_[0] ([tokens, rank] per adapter, at each Work's u_offset).
  if (scratch_.empty()) scratch_.emplace_back();
  std::vector<float>& u_all = scratch_[0];
  if (u_all.size() < u_size) u_all.resize(u_size);
  // Tasks: (work item, a range of rows of A or of B).
  struct Task {
    const Work* item;
    int64_t begin, end;
  };
  constexpr int64_t kRowsPerTask = 64;
  auto run = [&](bool phase_b) {
    std::vector<Task> tasks;
    int64_t macs = 0;
    for (const Work& item : work) {
      const int64_t r = item.w->rank;
      const int64_t rows = phase_b ? static_cast<int64_t>(item.w->b.size()) / r : r;
      const int64_t cols = phase_b ? r : static_cast<int64_t>(item.w->a.size()) / r;
      macs += rows * cols * static_cast<int64_t>(item.g->tokens.size());
      for (int64_t b = 0; b < rows; b += kRowsPerTask) tasks.push_back(Task{&item, b, std::min(rows, b + kRowsPerTask)});
    }
    auto task = [&](int64_t i, int) {
      const Task& t = tasks[static_cast<size_t>(i)];
      const LoraWeights& w = *t.item->w;
      const int64_t r = w.rank, in_dim = static_cast<int64_t>(w.a.size()) / r;
      const int64_t out_dim = static_cast<int64_t>(w.b.size()) / r;
      float* u = u_all.data() + t.item->u_offset;
      const std::vector<int32_t>& tokens = t.item->g->tokens;
      for (int64_t row = t.begin; row < t.end; ++row) {
        for (size_t k = 0; k < tokens.size(); ++k) {
          const int64_t token = tokens[k];
          if (!phase_b) {
            u[static_cast<int64_t>(k) * r + row] = Dot(w.a.data() + row * in_dim, in + token * in_dim, in_dim);
          } else {
            out[token * out_dim + row] += w.scale * Dot(w.b.data() + row * r, u + static_cast<int64_t>(k) * r, r);
          }
        }
      }
    };
    if (pool != nullptr && macs >= (1 << 16)) {
      pool->ParallelFor(static_cast<int64_t>(tasks.size()), task);
    } else {
      for (size_t i = 0; i < tasks.size(); ++i) task(static_cast<int64_t>(i), 0);
    }
  };
  run(/*phase_b=*/false);
  run(/*phase_b=*/true);
}

}  // namespace parallm
