// The Mamba-2 mixer of a hybrid layer (Nemotron-H), over a flat batch of many sequences: the in-projection, each
// sequence's causal conv1d and selective scan continuing from its state slot (kernels/ssm.h), the gated grouped
// RMSNorm and the out-projection. The matrix products run over the whole batch; the recurrent parts run per
// sequence (and per head), so each sequence's result depends on its own tokens and state only.
#pragma once

#include <vector>

#include "cache/ssm_state.h"
#include "model/config.h"
#include "model/forward_batch.h"
#include "model/weights.h"
#include "util/thread_pool.h"

namespace parallm {

// Reused across layers and steps.
struct MambaScratch {
  std::vector<float> proj;  // [num_tokens, ssm_in_proj]: z, xBC, dt
  std::vector<float> xbc;   // [num_tokens, ssm_conv_dim]: after the conv and SiLU
  std::vector<float> y;     // [num_tokens, ssm_inner]: the scan's output, then gated and normed
};

// out = mixer(in) for every token of `batch` ([num_tokens, hidden] each; out may be in). Every sequence must carry a
// state slot of `state`; a sequence whose first new token is at position 0 must have had its slot reset.
void MambaMixer(const ModelConfig& c, const MambaWeights& w, int layer, const ForwardBatch& batch, const float* in,
                float* out, SsmStateStorage& state, MambaScratch& scratch, ThreadPool* pool);

}  // namespace parallm
