// SingleSequence: runs one sequence through a Model with its own small KV storage: prefill, then one token
// at a time (hybrid models also keep their recurrent state in a one-slot state storage). What `parallm generate` and `parallm logits` use until the batching engine serves them.
#pragma once

#include <span>
#include <vector>

#include <memory>

#include "cache/kv_storage.h"
#include "cache/ssm_state.h"
#include "model/model.h"

namespace parallm {

class SingleSequence {
 public:
  // Room for `max_tokens` tokens of context, its keys and values stored as `kv_dtype`.
  SingleSequence(Model& model, int max_tokens, ThreadPool* pool, KvDtype kv_dtype = KvDtype::kF32);

  // Appends `tokens` and runs them; returns the logits of the last one, or of every one when all_logits
  // ([tokens.size(), vocab] row-major).
  std::vector<float> Append(std::span<const int32_t> tokens, bool all_logits = false);
  // Runs the sequence with a LoRA adapter (nullptr: the base model); set before the first Append. Not owned.
  void SetAdapter(const LoraAdapter* adapter) { adapter_ = adapter; }
  // The sequence's prompt length (SequenceSlice::num_prompt_tokens; 0, the default: unknown): with it, the prompt runs
  // as the engine runs a request's (MatMul's bf16 formula below Bf16PromptEnd, a hybrid model's SSD chunks),
  // so the results equal the engine's. Set before the first Append.
  void SetNumPromptTokens(int n) { num_prompt_tokens_ = n; }
  int num_tokens() const { return num_tokens_; }
  int max_tokens() const { return max_tokens_; }

 private:
  Model& model_;
  ThreadPool* pool_;
  int max_tokens_;
  int num_tokens_ = 0;
  int num_prompt_tokens_ = 0;
  PagedKvStorage kv_;
  std::unique_ptr<SsmStateStorage> state_;  // hybrid models: one slot, slot 0
  std::vector<int32_t> block_table_;
  const LoraAdapter* adapter_ = nullptr;
};

}  // namespace parallm
