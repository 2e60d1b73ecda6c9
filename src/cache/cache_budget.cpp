// The split of one cache budget between recurrent-state slots and KV blocks (see cache_budget.h for the policy).
#include "cache/cache_budget.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "util/strings.h"

namespace parallm {

CacheBudget SplitCacheBudget(double budget_bytes, int64_t state_bytes, int64_t block_bytes, int32_t max_num_seqs,
                             int32_t explicit_slots) {
  CacheBudget b;
  const double block = static_cast<double>(std::max<int64_t>(block_bytes, 1));
  if (state_bytes <= 0) {
    b.kv_blocks = static_cast<int32_t>(std::clamp(std::floor(budget_bytes / block), 1.0, 2e9));
    return b;
  }
  const double state = static_cast<double>(state_bytes);
  // Slots that fit beside at least one KV block: without a block no request could run.
  const double fit = std::max(0.0, std::floor((budget_bytes - block) / state));
  if (explicit_slots > 0) {
    b.state_slots = static_cast<int32_t>(std::min<double>(explicit_slots, fit));
    b.slots_capped = b.state_slots < explicit_slots;
  } else {
    const double half = std::floor(budget_bytes / 2 / state);
    const double want = std::max(1, max_num_seqs);
    b.state_slots = static_cast<int32_t>(std::min({want, std::max(half, 1.0), fit}));
    b.slots_capped = b.state_slots < want;
  }
  const double left = budget_bytes - state * b.state_slots;
  b.kv_blocks = b.state_slots > 0 ? static_cast<int32_t>(std::clamp(std::floor(left / block), 1.0, 2e9)) : 0;
  return b;
}

std::string DescribeCacheBudget(const CacheBudget& b, double budget_bytes, int64_t state_bytes, int64_t block_bytes,
                                int32_t max_num_seqs) {
  const std::string blocks = fmt::format("{} KV blocks x {}", b.kv_blocks, HumanBytes(static_cast<double>(block_bytes)));
  if (state_bytes <= 0) return fmt::format("{}: {}", HumanBytes(budget_bytes), blocks);
  if (b.state_slots == 0)
    return fmt::format("{} cannot hold one request's recurrent state ({}) beside one KV block ({})",
                       HumanBytes(budget_bytes), HumanBytes(static_cast<double>(state_bytes)),
                       HumanBytes(static_cast<double>(block_bytes)));
  return fmt::format("{}: {} state slots x {}{} + {}", HumanBytes(budget_bytes), b.state_slots,
                     HumanBytes(static_cast<double>(state_bytes)),
                     b.slots_capped ? fmt::format(" (of --max-num-seqs {}: the budget holds no more; more requests wait)",
                                                  max_num_seqs)
                                    : "",
                     blocks);
}

}  // namespace parallm
