// DraftModel: speculative decoding's draft from a smaller model with the target's vocabulary. Each step it proposes
// up to K tokens greedily for every decoding request at once (K batched forward passes of the draft model over its
// own paged KV cache); the target verifies them in its next step as it does prompt-lookup drafts.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "cache/kv_cache_manager.h"
#include "cache/kv_storage.h"
#include "engine/speculation.h"
#include "model/model.h"

namespace parallm {

// Loads `config.model` (a file, folder or synthetic spec) as the draft for `target`. Refuses a draft whose
// vocabulary differs from the target's (another size, or other tokens where both files carry a vocabulary) and a
// hybrid (Mamba) draft, whose recurrent state cannot drop rejected tokens.
Result<std::shared_ptr<Model>> LoadDraftModel(const SpeculativeConfig& config, const Model& target);
// The checks of LoadDraftModel on a model already loaded.
Status CheckDraftModel(const Model& draft, const Model& target);

class DraftModel {
 public:
  // `num_blocks` blocks of `block_size` tokens for the draft's own KV cache (no prefix caching); `max_batch_tokens`
  // bounds one forward pass (a request's first draft computes its whole context: in chunks of at most that).
  DraftModel(std::shared_ptr<Model> model, int32_t num_blocks, int32_t block_size, KvDtype dtype,
             int32_t max_batch_tokens, ThreadPool* pool);

  // One request to draft for: its tokens so far (prompt and output) and how many tokens it may draft.
  struct Task {
    RequestId id;
    std::span<const int32_t> tokens;
    int32_t max_draft;
    std::vector<int32_t>* draft;  // out: the proposal, at most max_draft tokens (empty when none)
  };
  // Proposes greedily for every task, batched. The draft's cache keeps, per request, the longest prefix of what it
  // computed before that still matches `tokens` (a rejected draft is dropped there), and computes the rest. A
  // request the cache has no room for, or past the draft model's context, gets no draft.
  void Propose(std::span<Task> tasks);
  // Drops a request's cache (finished, cancelled or preempted). Unknown ids are ignored.
  void Free(RequestId id);

  const Model& model() const { return *model_; }
  const KVCacheManager& kv_manager() const { return kv_manager_; }
  int32_t num_cached_requests() const { return static_cast<int32_t>(cached_.size()); }

 private:
  // Runs the draft model over `tokens_`, `positions_`, `slots_` for `batch_` and returns the greedy token of each
  // row in logits_indices_.
  std::vector<int32_t> Run();

  std::shared_ptr<Model> model_;
  PagedKvStorage kv_storage_;
  KVCacheManager kv_manager_;
  int32_t max_batch_tokens_;
  ThreadPool* pool_;
  // Per request: the tokens whose K/V the draft's cache holds, in position order.
  std::unordered_map<RequestId, std::vector<int32_t>> cached_;
  // Reused across passes.
  ForwardBatch batch_;
  std::vector<int32_t> tokens_, positions_, logits_indices_;
  std::vector<int64_t> slots_;
};

}  // namespace parallm
