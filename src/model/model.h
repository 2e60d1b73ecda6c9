// Model: a loaded decoder and its forward pass over a flat batch of tokens from many sequences.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/kv_storage.h"
#include "cache/ssm_state.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "model/forward_batch.h"
#include "model/loader.h"
#include "model/mamba_mixer.h"
#include "model/moe.h"
#include "model/lora_apply.h"
#include "util/cache_line_allocator.h"
#include "util/thread_pool.h"

namespace parallm {

// Whether a prompt's rows (each sequence's positions below Bf16PromptEnd) take a bf16 formula with these weights: some
// projection they go through (attention, dense MLP, shared experts, Mamba projections) is quantized in a format
// MatMul's bf16 formula covers, the formulas are wanted (Bf16PromptsWanted), and either MatMul's runs here
// (Bf16RowsEnabled: AMX) or PromptAttention covers an attention layer (AMX, or AVX512-BF16 without it). Float models
// keep the exact f32 formulas.
bool PromptsTakeBf16(const ModelConfig& c, const ModelWeights& weights);
// Layer `layer`'s attention shape (its sliding window, the model's soft-capping).
AttentionShape AttentionShapeOf(const ModelConfig& c, int layer);

// The type `--kv-cache-dtype auto` stores keys and values in: f32 where the key and value projections are f32 (the
// exact cache of an f32 model), f16 where they are quantized or 16-bit (the type llama.cpp stores, and a 16-bit one
// as vLLM's auto; f16 keeps 3 more bits than bf16).
KvDtype AutoKvDtype(const ModelWeights& weights);

class Model {
 public:
  static Result<std::unique_ptr<Model>> Load(const std::string& path);
  explicit Model(LoadedModel loaded);

  const ModelConfig& config() const { return loaded_.config; }
  const LoadedModel& loaded() const { return loaded_; }
  // Serves `tokens` of context whatever the file declares (--max-model-len): positions past the trained context
  // are computed the same way (RoPE has no table to outgrow), they are just out of what the weights were trained on.
  void OverrideContextLength(int32_t tokens) { loaded_.config.context_length = tokens; }
  // Seconds spent repacking the weights at construction (0 when off).
  double repack_seconds() const { return repack_seconds_; }
  // Bytes of the stored (memory-mapped) weights whose pages left the process's resident memory once repacked.
  size_t released_stored_bytes() const { return released_stored_bytes_; }

  // A KV storage shape for this model with `num_blocks` blocks of `block_size` slots.
  KvStorageShape KvShape(int num_blocks, int block_size = 16, KvDtype dtype = KvDtype::kF32) const;
  // The type `--kv-cache-dtype auto` stores keys and values in (AutoKvDtype above).
  KvDtype AutoKvDtype() const { return parallm::AutoKvDtype(loaded_.weights); }
  // Hybrid models (Nemotron-H) keep a recurrent state per sequence beside the KV cache (cache/ssm_state.h).
  bool has_state() const { return loaded_.config.hybrid(); }
  // Whether a step's prompt rows take MatMul's bf16 formula here (the free function below): the scheduler then keys
  // cached blocks by it.
  bool PromptsTakeBf16() const;
  // The state storage shape for `num_slots` sequences (has_state() only).
  SsmStateShape StateShape(int num_slots) const;

  // Runs every token of `batch` through the decoder: writes each token's K/V at its slot in `kv`, attends
  // causally over its sequence's context (read through the block table), and writes the logits of the
  // tokens in batch.logits_indices to `logits` ([logits_indices.size(), vocab], row-major).
  // Each token's result depends only on its own sequence (batch invariance). Not thread-safe: one caller.
  // Hybrid models also read and advance each sequence's state slot in `state` (required for them, ignored otherwise);
  // a slot is reset when its sequence's first new token is at position 0.
  void Forward(const ForwardBatch& batch, PagedKvStorage& kv, float* logits, ThreadPool* pool,
               SsmStateStorage* state = nullptr);
  // Forward for greedy decoding: writes each output row's argmax ([logits_indices.size()]: the index of its largest
  // logit, ties to the lowest, exactly ArgMax over Forward's row) instead of the logits, which are never stored
  // (MatMulArgMax).
  void ForwardArgMax(const ForwardBatch& batch, PagedKvStorage& kv, int32_t* argmax, ThreadPool* pool,
                     SsmStateStorage* state = nullptr);

 private:
  class Ops;  // the LayerOps a step's layers run on (decoder.cpp)

  // Forward up to the LM head: every layer, then the final norm of the output rows into xn_; returns their number.
  int64_t RunToHead(const ForwardBatch& batch, PagedKvStorage& kv, ThreadPool* pool, SsmStateStorage* state);

  // The KV storage layer of attention layer `layer`: itself, or for hybrid models its rank among the attention
  // layers (the Mamba, MLP and expert layers keep no KV).
  int KvLayer(int layer) const { return kv_layer_.empty() ? layer : kv_layer_[static_cast<size_t>(layer)]; }

  // The cos and sin (RopeCosSin, from the step's table) token t rotates by in `layer`: of the frequencies of its layer
  // and sequence (Gemma 3's local base, Phi-3's long factors).
  const float* RopeCosSinFor(const ForwardBatch& batch, int64_t t, int layer) const;
  void Attention(const ForwardBatch& batch, int layer, PagedKvStorage& kv, ThreadPool* pool);
  void AddPromptRuns(const ForwardBatch& batch, const SequenceSlice& seq, int32_t n, int n_kv_heads, int n_threads);

  LoadedModel loaded_;
  double repack_seconds_ = 0;
  size_t released_stored_bytes_ = 0;
  std::vector<int> kv_layer_;  // hybrid models: layer -> KV storage layer (-1: none)
  // [rotary_dim / 2] each: the global layers' frequencies (Phi-3: the short factors), the windowed layers' (Gemma 3;
  // empty otherwise) and Phi-3's long ones (empty otherwise).
  std::vector<float> inv_freq_, inv_freq_local_, inv_freq_long_;
  // The step's RoPE angles (RopeCosSin) of every token for each of those sets (an empty set's part unused):
  // [3][num_tokens][rotary_dim], computed once a step rather than once a layer.
  std::vector<float> rope_cs_;
  // Scratch, sized per call to the batch: [num_tokens, width] each.
  // A step's activations: rows that threads write side by side (attention's output a KV head's query heads each,
  // the products a range of columns each) start on a cache line, so no line is written by two cores.
  template <class T>
  using Rows = std::vector<T, CacheLineAllocator<T>>;
  Rows<float> x_, xn_, q_, k_, v_, attn_, gate_, up_;
  std::vector<int32_t> token_seq_;  // sequence index of each token
  // The step's rows that take MatMul's bf16 formula in the attention and dense MLP projections (where
  // Bf16RowsEnabled()): each sequence's prompt positions below Bf16PromptEnd (PromptRows).
  std::vector<RowRange> prompt_rows_;
  // Whether a prompt's rows (PromptRowsOf) take PromptAttention (where the layer's shape allows): set per Forward, where
  // some sequence has such rows and PromptsTakeBf16 (which the scheduler also reads to keep the prefix cache's
  // bf16-computed blocks apart).
  bool prompt_attention_ = false;
  // Mixture-of-experts scratch: router logits [num_tokens, n_experts], the routing, the assignments' inputs and
  // outputs in grouped order [num_tokens * top_k, hidden] and gate/up [num_tokens * top_k, expert_ffn], the shared
  // expert's output [num_tokens, hidden] and gate values [num_tokens].
  Rows<float> router_logits_, moe_y_, moe_gate_, moe_up_, xs_, shared_scale_;
  ExpertRouting routing_;
  MambaScratch mamba_;
  std::vector<MatMulGroupOut> expert_products_;  // a sparse layer's per-expert products (gate and up, then down)
  LoraBatch lora_;  // the step's tokens grouped by LoRA adapter (empty when every sequence runs the base model)
  std::vector<std::vector<float>> scores_;  // per thread: attention scratch (scores of a KV head's query heads)
  // A step's attention work, one entry per KV head and run of consecutive tokens of one sequence (a decode token
  // alone, a prefill chunk in runs of kAttentionTokenBlock, a prompt's bf16 rows in one or a few parts), heaviest
  // first (Model::Attention).
  struct AttentionRun {
    int32_t first_token, num_tokens, kv_head;
    int64_t cost;  // positions read over the run's tokens and heads
    bool prompt = false;  // PromptAttention's formula
    int32_t kv_heads = 1;  // KV heads [kv_head, kv_head + kv_heads), one after another
  };
  std::vector<AttentionRun> attention_runs_;
};

}  // namespace parallm
