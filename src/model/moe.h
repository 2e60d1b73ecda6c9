// Expert routing for mixture-of-experts layers: each token's top-k experts from its router logits, and the
// bookkeeping that groups the tokens of a whole batch by expert, so that each active expert runs one matrix
// product over all of its tokens (one read of its weights per step, however many sequences chose it).
#pragma once

#include <cstdint>
#include <vector>

#include "util/thread_pool.h"

namespace parallm {

// The routing of one step's tokens through one sparse layer.
struct ExpertRouting {
  int num_experts = 0;
  int top_k = 0;
  // Per token, in rank order (highest probability first; equal probabilities: the lower expert id first):
  std::vector<int32_t> expert;  // [num_tokens * top_k]
  std::vector<float> weight;    // [num_tokens * top_k]: the combine weights
  // The assignments (token, rank) grouped by expert: expert e's are positions [offsets[e], offsets[e + 1]) of
  // `token`, in ascending token order (a token appears at most once per expert).
  std::vector<int32_t> offsets;  // [num_experts + 1]
  std::vector<int32_t> token;    // [num_tokens * top_k]
  // position[t * top_k + j]: where assignment (t, j) sits in the grouped order.
  std::vector<int32_t> position;  // [num_tokens * top_k]

  int64_t num_tokens() const { return top_k > 0 ? static_cast<int64_t>(expert.size()) / top_k : 0; }
};

// Routes `num_tokens` tokens from their router logits ([num_tokens, num_experts], f32): softmax over all experts
// (f32, max subtracted, sums in expert order), the top_k largest probabilities, divided by their sum when
// `renormalize` (Qwen's norm_topk_prob; Mixtral's softmax over the top-k logits is the same), then groups the
// assignments by expert. Each token's result depends on its own logits only, so the tokens are routed over `pool`
// (may be null) in ranges, with the same results on any split.
void RouteTokens(const float* logits, int64_t num_tokens, int num_experts, int top_k, bool renormalize,
                 ExpertRouting* r, ThreadPool* pool = nullptr);

// Fills r->offsets, r->token and r->position from r->expert (a counting sort: deterministic, stable in token order).
void GroupByExpert(ExpertRouting* r);

}  // namespace parallm
