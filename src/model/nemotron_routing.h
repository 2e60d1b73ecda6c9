// Nemotron-H's expert routing (transformers' NemotronHMoE.route_tokens_to_experts, DeepSeek-V3 style): sigmoid scores,
// a per-expert correction bias for the choice only, group-limited top-k, weights from the unbiased scores.
#pragma once

#include <cstdint>

#include "model/moe.h"

namespace parallm {

struct SigmoidRouting {
  int num_experts = 0;
  int top_k = 0;
  int groups = 1;        // experts split into `groups` equal groups (n_group)
  int topk_groups = 1;   // the experts are chosen from this many groups (topk_group)
  bool renormalize = true;   // norm_topk_prob: weights divided by their sum (+ 1e-20)
  float scaling = 1.0f;      // routed_scaling_factor
};

// Routes `num_tokens` tokens from their router logits ([num_tokens, num_experts], f32) with the correction `bias`
// ([num_experts]): score = sigmoid(logit); choice = score + bias; a group's rank is the sum of its two largest choices;
// the best topk_groups groups (ties: lower group id) keep their experts; of those the top_k by choice (ties: lower
// expert id), in rank order; weight = score (renormalised, scaled). Then groups the assignments by expert.
void RouteTokensSigmoid(const float* logits, const float* bias, int64_t num_tokens, const SigmoidRouting& p,
                        ExpertRouting* r);

}  // namespace parallm
