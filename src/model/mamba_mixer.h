// The Mamba-2 mixer of a hybrid layer (Nemotron-H), over a flat batch of many sequences: the in-projection, each
// sequence's causal conv1d and selective scan continuing from its state slot (kernels/ssm.h, and the chunked SSD form
// of kernels/ssm_chunked.h over a prompt's whole chunks), the gated grouped RMSNorm and the out-projection. The
// matrix products run over the whole batch; the recurrent parts run per sequence (and per head), so each sequence's
// result depends on its own tokens and state only.
#pragma once

#include <vector>

#include "cache/ssm_state.h"
#include "kernels/matmul.h"
#include "model/config.h"
#include "model/forward_batch.h"
#include "model/weights.h"
#include "util/thread_pool.h"

namespace parallm {

// The SSD chunk of the mixer and the scheduler: the model's chunk_size (ModelConfig::ssm_chunk), at most 32. The
// published chunk_size is the tile of a GPU kernel, not part of the model's math; on a CPU a chunk's cost per token
// grows with its length (the masked C·Bᵀ and its product with x) while the products stay efficient down to 32
// tokens: one thread over 1024 tokens, nemotron-h-mini's mixer scan took 57 ms with chunks of 128, 33 with 32 (the
// token-by-token scan 176), the Nano shape's 250, 175 (scan 1000).
int SsdChunk(const ModelConfig& c);

// Which of a slice's tokens the scan computes in its chunked (SSD) form: the positions [chunked_begin, chunked_end),
// whole chunks of `chunk` (SsdChunk) tokens counted from position 0, each inside both this slice and the prompt
// (SequenceSlice::num_prompt_tokens; unknown: the slice's end). The positions before and after run token by token.
//
// The invariant that keeps hybrid models batch-invariant: the two forms round differently, so every position must
// get the same form however the prompt was split into steps. Decode tokens and a prompt's tail past its last whole
// chunk always run token by token; a whole chunk inside the prompt runs chunked, which needs the whole chunk in one
// step: the engine's scheduler starts and ends every prefill chunk of a hybrid model on a multiple of SsdChunk
// below the prompt's last whole chunk (Scheduler::SsdAlign, checked by CheckIntegrity). A request recomputed
// after preemption sees the same prompt length, so its decoded tokens are recomputed token by token too.
struct SsdRuns {
  int32_t chunked_begin = 0, chunked_end = 0;  // absolute positions; chunked_end == chunked_begin: none
};
SsdRuns SsdChunks(const SequenceSlice& seq, int chunk);

// Reused across layers and steps.
struct MambaScratch {
  std::vector<float> proj;  // [num_tokens, ssm_in_proj]: z, xBC, dt
  std::vector<float> xbc;   // [num_tokens, ssm_conv_dim]: after the conv and SiLU
  std::vector<float> y;     // [num_tokens, ssm_inner]: the scan's output, then gated and normed
  struct ScanTask {
    int32_t seq, head_begin, head_end;
    SsdRuns runs;  // the sequence's chunked positions
  };
  std::vector<ScanTask> tasks;  // the scan's (sequence, heads) units of work
};

// out = mixer(in) for every token of `batch` ([num_tokens, hidden] each; out may be in). Every sequence must carry a
// state slot of `state`; a sequence whose first new token is at position 0 must have had its slot reset.
// `bf16_rows`: MatMul's, for the input and output projections (the step's prompt rows).
void MambaMixer(const ModelConfig& c, const MambaWeights& w, int layer, const ForwardBatch& batch, const float* in,
                float* out, SsmStateStorage& state, MambaScratch& scratch, ThreadPool* pool,
                std::span<const RowRange> bf16_rows = {});

}  // namespace parallm
