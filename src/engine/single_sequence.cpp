// SingleSequence: one sequence, blocks 0..n-1 of a private KV storage in order.
#include "engine/single_sequence.h"

#include <numeric>

#include "util/check.h"

namespace parallm {
namespace {
constexpr int kBlockSize = 16;
}

SingleSequence::SingleSequence(Model& model, int max_tokens, ThreadPool* pool, KvDtype kv_dtype)
    : model_(model),
      pool_(pool),
      max_tokens_(max_tokens),
      kv_(model.KvShape((max_tokens + kBlockSize - 1) / kBlockSize, kBlockSize, kv_dtype)) {
  if (model.has_state()) state_ = std::make_unique<SsmStateStorage>(model.StateShape(1));
  block_table_.resize(static_cast<size_t>(kv_.shape().num_blocks));
  std::iota(block_table_.begin(), block_table_.end(), 0);
}

std::vector<float> SingleSequence::Append(std::span<const int32_t> tokens, bool all_logits) {
  const int n = static_cast<int>(tokens.size());
  PARALLM_CHECK(n > 0 && num_tokens_ + n <= max_tokens_);
  std::vector<int32_t> positions(static_cast<size_t>(n));
  std::vector<int64_t> slots(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    positions[static_cast<size_t>(i)] = num_tokens_ + i;
    slots[static_cast<size_t>(i)] = num_tokens_ + i;  // block b holds slots [b*16, b*16+16) and the table is 0..n
  }
  std::vector<int32_t> logits_indices;
  if (all_logits) {
    logits_indices.resize(static_cast<size_t>(n));
    std::iota(logits_indices.begin(), logits_indices.end(), 0);
  } else {
    logits_indices.push_back(n - 1);
  }
  ForwardBatch batch;
  batch.tokens = tokens;
  batch.positions = positions;
  batch.slot_mapping = slots;
  batch.sequences.push_back(SequenceSlice{0, n, num_tokens_ + n, block_table_, num_prompt_tokens_, adapter_, state_ ? 0 : -1});
  batch.logits_indices = logits_indices;
  std::vector<float> logits(logits_indices.size() * static_cast<size_t>(model_.config().vocab));
  model_.Forward(batch, kv_, logits.data(), pool_, state_.get());
  num_tokens_ += n;
  return logits;
}

}  // namespace parallm
