// Expert routing: softmax, top-k with ties to the lowest expert id, and grouping by expert.
#include "model/moe.h"

#include <algorithm>
#include <cmath>

#include "util/check.h"

namespace parallm {

void RouteTokens(const float* logits, int64_t num_tokens, int num_experts, int top_k, bool renormalize,
                 ExpertRouting* r, ThreadPool* pool) {
  PARALLM_CHECK(num_experts > 0 && top_k > 0 && top_k <= num_experts);
  r->num_experts = num_experts;
  r->top_k = top_k;
  r->expert.resize(static_cast<size_t>(num_tokens * top_k));
  r->weight.resize(static_cast<size_t>(num_tokens * top_k));
  auto route = [&](int64_t t0, int64_t t1) {
    std::vector<float> p(static_cast<size_t>(num_experts));
    std::vector<char> taken(static_cast<size_t>(num_experts));
    for (int64_t t = t0; t < t1; ++t) {
      const float* z = logits + t * num_experts;
      float max = z[0];
      for (int e = 1; e < num_experts; ++e) max = std::max(max, z[e]);
      float sum = 0;
      for (int e = 0; e < num_experts; ++e) sum += p[static_cast<size_t>(e)] = std::exp(z[e] - max);
      for (float& v : p) v /= sum;
      std::fill(taken.begin(), taken.end(), 0);
      int32_t* ids = r->expert.data() + t * top_k;
      float* w = r->weight.data() + t * top_k;
      float picked = 0;
      for (int j = 0; j < top_k; ++j) {
        int best = -1;
        for (int e = 0; e < num_experts; ++e)  // strictly greater: a tie keeps the lower id
          if (!taken[static_cast<size_t>(e)] && (best < 0 || p[static_cast<size_t>(e)] > p[static_cast<size_t>(best)]))
            best = e;
        taken[static_cast<size_t>(best)] = 1;
        ids[j] = best;
        w[j] = p[static_cast<size_t>(best)];
        picked += w[j];
      }
      if (renormalize)
        for (int j = 0; j < top_k; ++j) w[j] /= picked;
    }
  };
  // A 64-sequence step routes 64 tokens over 64 experts in every sparse layer: ~0.6% of the step on one thread.
  const int64_t parts =
      pool != nullptr && num_tokens >= 16 ? std::min<int64_t>(num_tokens / 8, pool->num_threads() * 2) : 1;
  if (parts > 1) {
    pool->ParallelFor(parts, [&](int64_t part, int) {
      auto [t0, t1] = SplitRange(num_tokens, parts, part);
      route(t0, t1);
    });
  } else {
    route(0, num_tokens);
  }
  GroupByExpert(r);
}

void GroupByExpert(ExpertRouting* r) {
  const int E = r->num_experts, k = r->top_k;
  const int64_t n = static_cast<int64_t>(r->expert.size());
  r->offsets.assign(static_cast<size_t>(E) + 1, 0);
  for (int32_t e : r->expert) {
    PARALLM_CHECK(e >= 0 && e < E);
    ++r->offsets[static_cast<size_t>(e) + 1];
  }
  for (int e = 0; e < E; ++e) r->offsets[static_cast<size_t>(e) + 1] += r->offsets[static_cast<size_t>(e)];
  std::vector<int32_t> next(r->offsets.begin(), r->offsets.end() - 1);
  r->token.resize(static_cast<size_t>(n));
  r->position.resize(static_cast<size_t>(n));
  // Assignments visited in token order, so each expert's tokens come out ascending.
  for (int64_t a = 0; a < n; ++a) {
    const int32_t pos = next[static_cast<size_t>(r->expert[static_cast<size_t>(a)])]++;
    r->token[static_cast<size_t>(pos)] = static_cast<int32_t>(a / k);
    r->position[static_cast<size_t>(a)] = pos;
  }
}

}  // namespace parallm
