// LoraBatch: one step's tokens grouped by the LoRA adapter their sequence runs with, and the low-rank update
// out += scale * B (A x) applied group by group after the shared base projection. Each token's update is
// computed the same way whatever else is in the batch (batch invariance per adapter).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/forward_batch.h"
#include "model/lora.h"
#include "util/thread_pool.h"

namespace parallm {

class LoraBatch {
 public:
  // Groups the tokens of `batch` by their sequence's adapter (base-model tokens are left out).
  void Build(const ForwardBatch& batch);
  bool empty() const { return groups_.empty(); }

  // One projection's output [num_tokens, out_dim] (the target's shape).
  struct Out {
    LoraTarget target;
    float* out;
  };
  // out[t] += scale * B (A in[t]) for every listed projection and every token t whose adapter adapts (`layer`,
  // target): several projections of one input (q/k/v, gate/up) go in one call, so their updates share the
  // dispatches. `in` is [num_tokens, in_dim]; it must not overlap any `out`.
  void Apply(int layer, std::span<const Out> outs, const float* in, ThreadPool* pool);
  void Apply(int layer, LoraTarget target, const float* in, float* out, ThreadPool* pool) {
    const Out o{target, out};
    Apply(layer, std::span<const Out>(&o, 1), in, pool);
  }

 private:
  struct Group {
    const LoraAdapter* adapter;
    std::vector<int32_t> tokens;
  };
  // One (adapter group, projection) update of a call.
  struct Item {
    const Group* group;
    const LoraWeights* w;
    float* out;
    int64_t in_dim, out_dim;
    float* u;  // [tokens, rank]: A x of the group's tokens
  };
  // A piece of an item's shrink (rank rows) or expand (output columns): [begin, end).
  struct Task {
    int32_t item;
    int64_t begin, end;
  };
  void Shrink(const Item& it, const float* in, int64_t j0, int64_t j1) const;
  void Expand(const Item& it, int64_t o0, int64_t o1) const;

  std::vector<Group> groups_;
  std::vector<Item> items_;
  std::vector<Task> tasks_;
  std::vector<float> u_;
};

}  // namespace parallm
