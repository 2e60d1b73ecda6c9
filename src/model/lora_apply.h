// LoraBatch: one step's tokens grouped by the LoRA adapter their sequence runs with, and the low-rank update
// out += scale * B (A x) applied group by group after the shared base projection. Each token's update is
// computed the same way whatever else is in the batch (batch invariance per adapter).
#pragma once

#include <cstdint>
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

  // out[t] += scale * B (A in[t]) for every token t whose adapter adapts (`layer`, `target`); `in` is
  // [num_tokens, in_dim], `out` [num_tokens, out_dim] (the target's shape). `in` and `out` must not overlap.
  void Apply(int layer, LoraTarget target, const float* in, float* out, ThreadPool* pool);

 private:
  struct Group {
    const LoraAdapter* adapter;
    std::vector<int32_t> tokens;
  };
  std::vector<Group> groups_;
  std::vector<std::vector<float>> scratch_;  // per thread: A x of one token [rank]
};

}  // namespace parallm
