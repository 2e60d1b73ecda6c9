// The decoder forward pass shared by every supported family (Llama, Mistral, Qwen2, Qwen3): pre-norm
// blocks of grouped-query attention with RoPE and a SwiGLU MLP; family differences (q/k/v bias, q/k norm,
// RoPE pairing, tied embeddings) come from ModelConfig flags set by arch/*.cpp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/model.h"
#include "util/check.h"

namespace parallm {

Result<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  PARALLM_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(path));
  return std::make_unique<Model>(std::move(loaded));
}

Model::Model(LoadedModel loaded) : loaded_(std::move(loaded)) {
  const ModelConfig& c = loaded_.config;
  inv_freq_.resize(static_cast<size_t>(c.head_dim / 2));
  RopeInvFreqs(c.head_dim, c.rope_theta, c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data(),
               inv_freq_.data());
  // Repack every matrix once into the kernels' layout (PARALLM_REPACK=0 turns it off, for comparisons).
  const char* env = std::getenv("PARALLM_REPACK");
  if (env == nullptr || std::strcmp(env, "0") != 0) {
    const auto start = std::chrono::steady_clock::now();
    ModelWeights& w = loaded_.weights;
    std::vector<MatrixView*> mats;
    for (LayerWeights& lw : w.layers) {
      for (MatrixView* m : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down}) mats.push_back(m);
    }
    mats.push_back(&w.output);  // a copy of the view even when tied: the embedding lookup keeps reading the stored rows
    // One matrix per task over all cores: each is packed by one thread, so the copies do not depend on the split.
    std::vector<std::shared_ptr<uint8_t[]>> mems(mats.size());
    std::vector<size_t> bytes(mats.size(), 0);
    ThreadPool pool(0);
    pool.ParallelFor(static_cast<int64_t>(mats.size()), [&](int64_t i, int) {
      mems[static_cast<size_t>(i)] = RepackForKernels(mats[static_cast<size_t>(i)], &bytes[static_cast<size_t>(i)]);
    });
    for (size_t i = 0; i < mats.size(); ++i) {
      if (mems[i] == nullptr) continue;
      w.packed.push_back(std::move(mems[i]));
      w.packed_bytes += bytes[i];
    }
    repack_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (std::getenv("PARALLM_REPACK_VERBOSE") != nullptr)
      std::fprintf(stderr, "repacked %zu matrices: %.1f MiB in %.3f s\n", w.packed.size(),
                   static_cast<double>(w.packed_bytes) / (1 << 20), repack_seconds_);
  }
}

KvStorageShape Model::KvShape(int num_blocks, int block_size) const {
  const ModelConfig& c = loaded_.config;
  return KvStorageShape{c.n_layers, c.n_kv_heads, c.head_dim, block_size, num_blocks};
}

namespace {

void AddBias(float* x, const std::vector<float>& bias, int64_t n_rows) {
  if (bias.empty()) return;
  const int64_t n = static_cast<int64_t>(bias.size());
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n; ++i) x[r * n + i] += bias[static_cast<size_t>(i)];
}

void Resize(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

}  // namespace

void Model::Forward(const ForwardBatch& batch, PagedKvStorage& kv, float* logits, ThreadPool* pool) {
  const ModelConfig& c = loaded_.config;
  const ModelWeights& w = loaded_.weights;
  const int64_t T = batch.num_tokens();
  PARALLM_CHECK(static_cast<int64_t>(batch.positions.size()) == T);
  PARALLM_CHECK(static_cast<int64_t>(batch.slot_mapping.size()) == T);
  const int64_t H = c.hidden, Q = c.q_dim(), KV = c.kv_dim(), F = c.ffn;
  Resize(x_, T * H);
  Resize(xn_, T * H);
  Resize(q_, T * Q);
  Resize(k_, T * KV);
  Resize(v_, T * KV);
  Resize(attn_, T * Q);
  Resize(gate_, T * F);
  Resize(up_, T * F);

  token_seq_.assign(static_cast<size_t>(T), -1);
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const SequenceSlice& seq = batch.sequences[s];
    PARALLM_CHECK(seq.token_begin >= 0 && seq.token_begin + seq.num_tokens <= T);
    for (int32_t i = 0; i < seq.num_tokens; ++i) token_seq_[static_cast<size_t>(seq.token_begin + i)] = static_cast<int32_t>(s);
  }
  for (int64_t t = 0; t < T; ++t) {
    PARALLM_CHECK_MSG(token_seq_[static_cast<size_t>(t)] >= 0, "token not covered by any sequence");
    PARALLM_CHECK(batch.tokens[static_cast<size_t>(t)] >= 0 && batch.tokens[static_cast<size_t>(t)] < c.vocab);
    DequantizeMatrixRow(w.token_embd, batch.tokens[static_cast<size_t>(t)], x_.data() + t * H);
  }

  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    // Attention block: x += Wo · attention(rope(norm(x) Wq), rope(norm(x) Wk), norm(x) Wv)
    RmsNorm(x_.data(), lw.attn_norm.data(), c.rms_eps, T, H, xn_.data());
    const MatMulOut qkv[] = {{&lw.wq, q_.data(), Q}, {&lw.wk, k_.data(), KV}, {&lw.wv, v_.data(), KV}};
    MatMulMulti(qkv, xn_.data(), T, pool);
    AddBias(q_.data(), lw.q_bias, T);
    AddBias(k_.data(), lw.k_bias, T);
    AddBias(v_.data(), lw.v_bias, T);
    if (c.qk_norm) {
      RmsNorm(q_.data(), lw.q_norm.data(), c.rms_eps, T * c.n_heads, c.head_dim, q_.data());
      RmsNorm(k_.data(), lw.k_norm.data(), c.rms_eps, T * c.n_kv_heads, c.head_dim, k_.data());
    }
    for (int64_t t = 0; t < T; ++t) {
      const int64_t pos = batch.positions[static_cast<size_t>(t)];
      ApplyRope(q_.data() + t * Q, c.n_heads, c.head_dim, c.head_dim, pos, inv_freq_.data(), c.rope_style);
      ApplyRope(k_.data() + t * KV, c.n_kv_heads, c.head_dim, c.head_dim, pos, inv_freq_.data(), c.rope_style);
      const int64_t slot = batch.slot_mapping[static_cast<size_t>(t)];
      PARALLM_CHECK(slot >= 0 && slot < kv.num_slots());
      std::copy_n(k_.data() + t * KV, KV, kv.Key(l, slot));
      std::copy_n(v_.data() + t * KV, KV, kv.Value(l, slot));
    }
    Attention(batch, l, kv, pool);
    MatMul(lw.wo, attn_.data(), T, xn_.data(), H, pool);
    for (int64_t i = 0; i < T * H; ++i) x_[static_cast<size_t>(i)] += xn_[static_cast<size_t>(i)];

    // MLP block: x += Wdown · (silu(norm(x) Wgate) * norm(x) Wup)
    RmsNorm(x_.data(), lw.ffn_norm.data(), c.rms_eps, T, H, xn_.data());
    const MatMulOut gate_up[] = {{&lw.w_gate, gate_.data(), F}, {&lw.w_up, up_.data(), F}};
    MatMulMulti(gate_up, xn_.data(), T, pool);
    // Elementwise (each value computed the same way whatever the split): over the pool when it is large
    // (32 tokens x 4864 is ~155K exps per layer, a few percent of a batched step on one thread).
    if (pool != nullptr && T * F >= 32768) {
      const int64_t chunks = std::min<int64_t>(pool->num_threads() * 4, (T * F) / 8192);
      pool->ParallelFor(chunks, [&](int64_t i, int) {
        auto [b, e] = SplitRange(T * F, chunks, i);
        SiluMul(gate_.data() + b, up_.data() + b, e - b, gate_.data() + b);
      });
    } else {
      SiluMul(gate_.data(), up_.data(), T * F, gate_.data());
    }
    MatMul(lw.w_down, gate_.data(), T, xn_.data(), H, pool);
    for (int64_t i = 0; i < T * H; ++i) x_[static_cast<size_t>(i)] += xn_[static_cast<size_t>(i)];
  }

  // Only the requested tokens go through the final norm and the LM head (the largest matrix).
  const int64_t n_out = static_cast<int64_t>(batch.logits_indices.size());
  if (n_out == 0) return;
  for (int64_t i = 0; i < n_out; ++i) {
    int32_t t = batch.logits_indices[static_cast<size_t>(i)];
    PARALLM_CHECK(t >= 0 && t < T);
    RmsNorm(x_.data() + t * H, w.output_norm.data(), c.rms_eps, 1, H, xn_.data() + i * H);
  }
  MatMul(w.output, xn_.data(), n_out, logits, c.vocab, pool);
}

// Causal grouped-query attention for every token, split into (token, KV head) tasks across threads; each
// token reads keys and values through its sequence's block table. A (token, head) result depends only on that
// token's sequence, whatever the batch or the split.
void Model::Attention(const ForwardBatch& batch, int layer, PagedKvStorage& kv, ThreadPool* pool) {
  const ModelConfig& c = loaded_.config;
  const int64_t T = batch.num_tokens();
  const int64_t Q = c.q_dim();
  const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  const PagedKvView view{kv.Key(layer, 0), kv.Value(layer, 0), static_cast<int64_t>(c.kv_dim()), kv.shape().block_size};
  const int n_threads = pool ? pool->num_threads() : 1;
  if (static_cast<int>(scores_.size()) < n_threads) scores_.resize(static_cast<size_t>(n_threads));

  auto task = [&](int64_t index, int thread) {
    const int64_t t = index / c.n_kv_heads;
    const int kvh = static_cast<int>(index % c.n_kv_heads);
    const SequenceSlice& seq = batch.sequences[static_cast<size_t>(token_seq_[static_cast<size_t>(t)])];
    const int64_t n_ctx = batch.positions[static_cast<size_t>(t)] + 1;  // causal: positions [0, pos]
    PARALLM_CHECK(n_ctx <= seq.context_len);
    PARALLM_CHECK(n_ctx <= static_cast<int64_t>(seq.block_table.size()) * view.block_size);
    std::vector<float>& scores = scores_[static_cast<size_t>(thread)];
    const int64_t scratch = PagedAttentionScratchSize(shape, n_ctx);
    if (static_cast<int64_t>(scores.size()) < scratch) scores.resize(static_cast<size_t>(scratch));
    PagedAttention(q_.data() + t * Q, shape, view, seq.block_table, n_ctx, kvh, kvh + 1, scores, attn_.data() + t * Q);
  };
  const int64_t n_tasks = T * c.n_kv_heads;
  if (pool != nullptr) {
    pool->ParallelFor(n_tasks, task);
  } else {
    for (int64_t i = 0; i < n_tasks; ++i) task(i, 0);
  }
}

}  // namespace parallm
