// How one cache budget (--kv-cache-gb) is split between a hybrid model's recurrent-state slots and KV blocks.
//
// Each running request of a hybrid model holds exactly one state slot (every Mamba layer's conv window and SSM state,
// a fixed size whatever its length) beside its KV blocks, so the slot count bounds how many requests run at once.
// vLLM bounds concurrency with --max-num-seqs and draws the Mamba state from the same memory as the KV cache;
// parallm does the same with a fixed split: --max-num-seqs slots come out of the budget first, the rest is KV
// blocks. A slot beyond --max-num-seqs could never be used; fewer would cap concurrency below it. So that long
// contexts keep room, the slots take at most half the budget: when --max-num-seqs slots do not fit in half,
// parallm takes as many as do (at least one, when one fits beside one KV block) and says so; requests beyond that
// wait for a slot. Models without state get every byte as KV blocks.
#pragma once

#include <cstdint>
#include <string>

namespace parallm {

struct CacheBudget {
  int32_t state_slots = 0;  // 0 for models without state, or when the budget cannot hold one slot and one block
  int32_t kv_blocks = 0;
  bool slots_capped = false;  // fewer slots than max_num_seqs asked for (half the budget holds no more)
};

// `budget_bytes` split for a model whose request state takes `state_bytes` (0: no state) and whose KV block takes
// `block_bytes`; `max_num_seqs` slots are wanted (`explicit_slots` > 0: exactly that many, if they fit beside a block).
CacheBudget SplitCacheBudget(double budget_bytes, int64_t state_bytes, int64_t block_bytes, int32_t max_num_seqs,
                             int32_t explicit_slots = 0);

// One line for logs and `info`: "2 GiB: 42 state slots x 47.6 MiB (of --max-num-seqs 64; half the budget holds no
// more) + 3,412 KV blocks x 192 KiB".
std::string DescribeCacheBudget(const CacheBudget& b, double budget_bytes, int64_t state_bytes, int64_t block_bytes,
                                int32_t max_num_seqs);

}  // namespace parallm
