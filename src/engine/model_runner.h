// ModelRunner: turns a SchedulerOutput into the model's flat ForwardBatch (tokens, positions, slot mapping,
// block tables), runs the forward pass over the paged KV storage, and hands back the logits of the requests
// that sample this step.
#pragma once

#include <vector>

#include "cache/kv_cache_manager.h"
#include "cache/kv_storage.h"
#include "engine/scheduler.h"
#include "model/model.h"

namespace parallm {

class ModelRunner {
 public:
  // `state`: hybrid models' recurrent-state storage (each sequence runs with its request's slot), else nullptr.
  ModelRunner(Model& model, PagedKvStorage& kv_storage, const KVCacheManager& kv_manager, ThreadPool* pool,
              SsmStateStorage* state = nullptr);

  // Logits [number of sampling requests, vocab], in the order they appear in `out.scheduled`. The caller may
  // modify them (samplers work in place); they are overwritten by the next Execute.
  std::vector<float>& Execute(const SchedulerOutput& out);
  // Execute for a step whose every sampling request picks greedily from its raw logits: the index of each row's
  // largest logit (ArgMax's), in the same order; the logits are never stored. Overwritten by the next call.
  const std::vector<int32_t>& ExecuteArgMax(const SchedulerOutput& out);

 private:
  Model& model_;
  PagedKvStorage& kv_storage_;
  const KVCacheManager& kv_manager_;
  ThreadPool* pool_;
  SsmStateStorage* state_;
  // The step's flat batch, viewing the vectors below.
  ForwardBatch BuildBatch(const SchedulerOutput& out);

  // Reused across steps.
  std::vector<int32_t> tokens_, positions_, logits_indices_, argmax_;
  std::vector<int64_t> slots_;
  std::vector<float> logits_;
};

}  // namespace parallm
