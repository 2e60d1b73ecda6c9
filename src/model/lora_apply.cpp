// LoraBatch: the per-adapter low-rank updates of one step, through the LoRA shrink and expand kernels.
#include "model/lora_apply.h"

#include <algorithm>

#include "kernels/lora_delta.h"
#include "util/check.h"

namespace parallm {
namespace {

// Task sizes when an update is split: rank rows per shrink task, output columns per expand task (a multiple of the
// kernels' widest tile, 4 x 16 columns). A decode step's group of ~8 tokens makes each piece a microsecond or two.
constexpr int64_t kRankChunk = 4;
constexpr int64_t kColChunk = 256;

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

void LoraBatch::Shrink(const Item& it, const float* in, int64_t j0, int64_t j1) const {
  const LoraShrinkArgs s{it.w->a.data(), it.in_dim, in, it.in_dim, it.group->tokens.data(),
                         static_cast<int64_t>(it.group->tokens.size()), it.u, it.w->rank};
  LoraShrink(s, j0, j1);
}

void LoraBatch::Expand(const Item& it, int64_t o0, int64_t o1) const {
  const LoraExpandArgs e{it.w->bt.data(), it.w->rank, it.out_dim, it.u, it.w->rank, it.group->tokens.data(),
                         static_cast<int64_t>(it.group->tokens.size()), it.w->scale, it.out, it.out_dim};
  LoraExpand(e, o0, o1);
}

void LoraBatch::Apply(int layer, std::span<const Out> outs, const float* in, ThreadPool* pool) {
  // Each token's u = A x and y += scale * B u are computed by the kernels with the same operations whatever the
  // batch, the split into tasks or the thread (kernels/lora_delta.h), so the split below never changes a bit.
  items_.clear();
  size_t u_size = 0;
  for (const Group& g : groups_) {
    PARALLM_CHECK(layer < static_cast<int>(g.adapter->layers.size()));
    for (const Out& o : outs) {
      const LoraWeights* w = g.adapter->Find(layer, o.target);
      if (w == nullptr) continue;
      PARALLM_CHECK_MSG(w->bt.size() == w->b.size(), "a LoRA adapter used before PrepareLoraForKernels");
      const int64_t in_dim = static_cast<int64_t>(w->a.size()) / w->rank;
      const int64_t out_dim = static_cast<int64_t>(w->b.size()) / w->rank;
      items_.push_back(Item{&g, w, o.out, in_dim, out_dim, nullptr});
      u_size += g.tokens.size() * static_cast<size_t>(w->rank);
    }
  }
  if (items_.empty()) return;
  if (u_.size() < u_size) u_.resize(u_size);
  float* u = u_.data();
  for (Item& it : items_) {
    it.u = u;
    u += it.group->tokens.size() * static_cast<size_t>(it.w->rank);
  }
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  if (threads == 1) {
    for (const Item& it : items_) {
      Shrink(it, in, 0, it.w->rank);
      Expand(it, 0, it.out_dim);
    }
    return;
  }
  // Many updates (several adapters, several projections): one whole update per task, one dispatch. Few: two
  // dispatches, the shrinks split by rank rows, then the expands by output columns, so every thread has work.
  if (items_.size() >= 4 * static_cast<size_t>(threads)) {
    pool->ParallelFor(static_cast<int64_t>(items_.size()), [&](int64_t i, int) {
      const Item& it = items_[static_cast<size_t>(i)];
      Shrink(it, in, 0, it.w->rank);
      Expand(it, 0, it.out_dim);
    });
    return;
  }
  auto split = [&](bool shrink) {
    tasks_.clear();
    for (size_t i = 0; i < items_.size(); ++i) {
      const int64_t n = shrink ? items_[i].w->rank : items_[i].out_dim, chunk = shrink ? kRankChunk : kColChunk;
      for (int64_t b = 0; b < n; b += chunk)
        tasks_.push_back(Task{static_cast<int32_t>(i), b, std::min(n, b + chunk)});
    }
    pool->ParallelFor(static_cast<int64_t>(tasks_.size()), [&](int64_t t, int) {
      const Task& task = tasks_[static_cast<size_t>(t)];
      const Item& it = items_[static_cast<size_t>(task.item)];
      if (shrink) {
        Shrink(it, in, task.begin, task.end);
      } else {
        Expand(it, task.begin, task.end);
      }
    });
  };
  split(true);
  split(false);
}

}  // namespace parallm
