// ModelRunner: SchedulerOutput -> ForwardBatch -> logits (or, for greedy steps, their argmax).
#include "engine/model_runner.h"

#include "util/check.h"

namespace parallm {

ModelRunner::ModelRunner(Model& model, PagedKvStorage& kv_storage, const KVCacheManager& kv_manager, ThreadPool* pool,
                         SsmStateStorage* state)
    : model_(model), kv_storage_(kv_storage), kv_manager_(kv_manager), pool_(pool), state_(state) {
  PARALLM_CHECK(kv_storage.shape().block_size == kv_manager.block_size());
  PARALLM_CHECK_MSG(model.has_state() == (state != nullptr), "a hybrid model runs with its state storage, others without");
}

std::vector<float>& ModelRunner::Execute(const SchedulerOutput& out) {
  const ForwardBatch batch = BuildBatch(out);
  logits_.resize(logits_indices_.size() * static_cast<size_t>(model_.config().vocab));
  if (!tokens_.empty()) model_.Forward(batch, kv_storage_, logits_.data(), pool_, state_);
  return logits_;
}

const std::vector<int32_t>& ModelRunner::ExecuteArgMax(const SchedulerOutput& out) {
  const ForwardBatch batch = BuildBatch(out);
  argmax_.resize(logits_indices_.size());
  if (!tokens_.empty()) model_.ForwardArgMax(batch, kv_storage_, argmax_.data(), pool_, state_);
  return argmax_;
}

ForwardBatch ModelRunner::BuildBatch(const SchedulerOutput& out) {
  tokens_.clear();
  positions_.clear();
  slots_.clear();
  logits_indices_.clear();
  ForwardBatch batch;
  const int32_t bs = kv_manager_.block_size();
  for (const ScheduledRequest& s : out.scheduled) {
    const Request& r = *s.request;
    std::span<const int32_t> table = kv_manager_.BlockTable(r.id);
    const int32_t end = s.num_computed_tokens + s.num_new_tokens;
    PARALLM_CHECK(static_cast<int64_t>(table.size()) * bs >= end);
    batch.sequences.push_back(
        SequenceSlice{static_cast<int32_t>(tokens_.size()), s.num_new_tokens, end, table, r.num_prompt_tokens,
                      r.adapter.get(), kv_manager_.StateSlot(r.id)});
    PARALLM_CHECK(static_cast<size_t>(s.num_draft_tokens) == r.draft_tokens.size());
    for (int32_t p = s.num_computed_tokens; p < end; ++p) {
      // Past the request's tokens come its draft's (speculative decoding).
      tokens_.push_back(p < r.num_tokens() ? r.tokens[static_cast<size_t>(p)]
                                           : r.draft_tokens[static_cast<size_t>(p - r.num_tokens())]);
      positions_.push_back(p);
      slots_.push_back(static_cast<int64_t>(table[static_cast<size_t>(p / bs)]) * bs + p % bs);
    }
    // One row for the last token, and one for each draft token: the sampler checks the draft against them.
    if (s.samples)
      for (int32_t j = s.num_draft_tokens; j >= 0; --j) logits_indices_.push_back(static_cast<int32_t>(tokens_.size()) - 1 - j);
  }
  batch.tokens = tokens_;
  batch.positions = positions_;
  batch.slot_mapping = slots_;
  batch.logits_indices = logits_indices_;
  return batch;
}

}  // namespace parallm
