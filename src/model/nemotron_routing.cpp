// Sigmoid, group-limited expert routing.
#include "model/nemotron_routing.h"

#include <cmath>
#include <limits>
#include <vector>

#include "util/check.h"

namespace parallm {

void RouteTokensSigmoid(const float* logits, const float* bias, int64_t num_tokens, const SigmoidRouting& p,
                        ExpertRouting* r) {
  const int E = p.num_experts, k = p.top_k, G = p.groups;
  PARALLM_CHECK(E > 0 && k > 0 && k <= E && G > 0 && E % G == 0 && p.topk_groups >= 1 && p.topk_groups <= G);
  const int per_group = E / G;
  r->num_experts = E;
  r->top_k = k;
  r->expert.resize(static_cast<size_t>(num_tokens * k));
  r->weight.resize(static_cast<size_t>(num_tokens * k));
  std::vector<float> score(static_cast<size_t>(E)), choice(static_cast<size_t>(E)), group_score(static_cast<size_t>(G));
  std::vector<char> allowed(static_cast<size_t>(E)), taken_group(static_cast<size_t>(G));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int e = 0; e < E; ++e) {
      score[static_cast<size_t>(e)] = 1.0f / (1.0f + std::exp(-logits[t * E + e]));
      choice[static_cast<size_t>(e)] = score[static_cast<size_t>(e)] + (bias != nullptr ? bias[e] : 0.0f);
    }
    // Each group's two largest choices, summed (one expert a group: itself).
    for (int g = 0; g < G; ++g) {
      float a = neg_inf, b = neg_inf;
      for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
        const float v = choice[static_cast<size_t>(e)];
        if (v > a) {
          b = a;
          a = v;
        } else if (v > b) {
          b = v;
        }
      }
      group_score[static_cast<size_t>(g)] = per_group >= 2 ? a + b : a;
    }
    std::fill(taken_group.begin(), taken_group.end(), 0);
    std::fill(allowed.begin(), allowed.end(), 0);
    for (int j = 0; j < p.topk_groups; ++j) {
      int best = -1;
      for (int g = 0; g < G; ++g)
        if (!taken_group[static_cast<size_t>(g)] &&
            (best < 0 || group_score[static_cast<size_t>(g)] > group_score[static_cast<size_t>(best)]))
          best = g;
      taken_group[static_cast<size_t>(best)] = 1;
      for (int e = best * per_group; e < (best + 1) * per_group; ++e) allowed[static_cast<size_t>(e)] = 1;
    }
    int32_t* ids = r->expert.data() + t * k;
    float* w = r->weight.data() + t * k;
    float sum = 0;
    for (int j = 0; j < k; ++j) {
      int best = -1;
      for (int e = 0; e < E; ++e)
        if (allowed[static_cast<size_t>(e)] &&
            (best < 0 || choice[static_cast<size_t>(e)] > choice[static_cast<size_t>(best)]))
          best = e;
      PARALLM_CHECK_MSG(best >= 0, "fewer experts in the chosen groups than top_k");
      allowed[static_cast<size_t>(best)] = 0;
      ids[j] = best;
      w[j] = score[static_cast<size_t>(best)];
      sum += w[j];
    }
    for (int j = 0; j < k; ++j) w[j] = (p.renormalize ? w[j] / (sum + 1e-20f) : w[j]) * p.scaling;
  }
  GroupByExpert(r);
}

}  // namespace parallm
