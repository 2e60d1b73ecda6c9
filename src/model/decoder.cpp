// The decoder forward pass: token embedding, one layer block per layer as the family composes it (arch/*.cpp over
// the shared sublayers of LayerOps: RMSNorm, grouped-query attention with RoPE over the paged KV cache, the gated
// MLP), the final norm and the LM head. Per-family details that are data (q/k/v bias, q/k norm, RoPE pairing and
// scaling, sliding windows, soft-capping, the activation) come from ModelConfig.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include <unistd.h>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/prompt_attention.h"
#include "model/arch/arch.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/nemotron_routing.h"
#include "util/check.h"
#include "util/mapped_file.h"

namespace parallm {
namespace {

size_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
}

}  // namespace

Result<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  PARALLM_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(path));
  return std::make_unique<Model>(std::move(loaded));
}

Model::Model(LoadedModel loaded) : loaded_(std::move(loaded)) {
  const ModelConfig& c = loaded_.config;
  if (c.hybrid())
    for (int l = 0, next = 0; l < c.n_layers; ++l) kv_layer_.push_back(c.KindOf(l) == LayerKind::kAttention ? next++ : -1);
  const int rot = c.rotary();
  inv_freq_.resize(static_cast<size_t>(rot / 2));
  std::vector<float> divisors = c.rope_freq_factors;  // Llama 3
  if (c.rope_longrope) divisors = c.rope_longrope->short_factors;
  if (c.rope_linear_factor != 1.0f) {
    if (divisors.empty()) divisors.assign(static_cast<size_t>(rot / 2), 1.0f);
    for (float& d : divisors) d *= c.rope_linear_factor;
  }
  RopeInvFreqs(rot, c.rope_theta, divisors.empty() ? nullptr : divisors.data(), inv_freq_.data());
  if (c.rope_local_theta > 0 && c.sliding_window > 0) {
    inv_freq_local_.resize(static_cast<size_t>(rot / 2));
    RopeInvFreqs(rot, c.rope_local_theta, nullptr, inv_freq_local_.data());
  }
  if (c.rope_longrope) {
    inv_freq_long_.resize(static_cast<size_t>(rot / 2));
    RopeInvFreqs(rot, c.rope_theta, c.rope_longrope->long_factors.data(), inv_freq_long_.data());
  }
  // Repack every matrix once into the kernels' layout (PARALLM_REPACK=0 turns it off, for comparisons).
  const char* env = std::getenv("PARALLM_REPACK");
  if (env == nullptr || std::strcmp(env, "0") != 0) {
    const auto start = std::chrono::steady_clock::now();
    ModelWeights& w = loaded_.weights;
    std::vector<MatrixView*> mats;
    // Experts too, unless their copies would crowd the memory (a 30B-A3B model in 4 bits is ~16 GiB of experts, and
    // Q4_K's packed copies are ~1.3x the stored bytes): PARALLM_REPACK_EXPERTS=0/1 forces the choice; by default
    // they are repacked when their stored bytes are at most a quarter of physical memory (a bound set when the
    // stored pages stayed resident beside the copies; they are now released as each copy is made). Unpacked experts
    // run on the stored (memory-mapped) layout, just slower.
    size_t expert_bytes = 0;
    for (const LayerWeights& lw : w.layers)
      for (const auto* list : {&lw.moe.gate, &lw.moe.up, &lw.moe.down})
        for (const MatrixView& m : *list) expert_bytes += m.row_bytes * static_cast<size_t>(m.rows);
    const char* env_experts = std::getenv("PARALLM_REPACK_EXPERTS");
    const bool repack_experts = env_experts != nullptr ? std::strcmp(env_experts, "0") != 0
                                                       : expert_bytes <= PhysicalMemoryBytes() / 4;
    if (!repack_experts && expert_bytes > 0)
      std::fprintf(stderr, "experts not repacked (%.1f GiB stored; PARALLM_REPACK_EXPERTS=1 forces it)\n",
                   static_cast<double>(expert_bytes) / (1 << 30));
    for (LayerWeights& lw : w.layers) {
      for (MatrixView* m : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down}) mats.push_back(m);
      for (MatrixView* m : {&lw.moe.shared_gate, &lw.moe.shared_up, &lw.moe.shared_down}) mats.push_back(m);
      for (MatrixView* m : {&lw.mamba.in_proj, &lw.mamba.out_proj}) mats.push_back(m);
      if (!repack_experts) continue;
      for (auto* list : {&lw.moe.gate, &lw.moe.up, &lw.moe.down})
        for (MatrixView& m : *list) mats.push_back(&m);
    }
    mats.push_back(&w.output);  // a copy of the view even when tied: the embedding lookup keeps reading the stored rows
    // One matrix per task over all cores; the small ones (experts) share one huge-page mapping.
    ThreadPool pool(0);
    size_t bytes = 0;
    // Each repacked matrix's stored bytes leave the process's resident memory as soon as its copy is made (the kernels
    // read the copy; the file's page cache keeps them), so a model is not held twice: a 3B Q8_0 file's process
    // held 6.8 GB resident for 3.4 GB of weights. A tied LM head's are the token embedding's rows too: the lookup
    // maps in again the pages of the rows it reads, as it does for an untied embedding.
    std::atomic<size_t> released{0};
    auto release = [&](const MatrixView& m) {
      released += ReleaseMappedPages(m.data, m.row_bytes * static_cast<size_t>(m.rows));
      if (m.kind != MatrixView::Kind::kMlxAffine) return;
      const size_t params = MlxParamBytes(m, m.rows);
      released += ReleaseMappedPages(m.scales, params) + ReleaseMappedPages(m.biases, params);
    };
    for (auto& owner : RepackAllForKernels(mats, &pool, &bytes, release)) w.packed.push_back(std::move(owner));
    w.packed_bytes += bytes;
    repack_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    released_stored_bytes_ = released.load();
    if (std::getenv("PARALLM_REPACK_VERBOSE") != nullptr) {
      const auto repacked = std::count_if(mats.begin(), mats.end(), [](const MatrixView* m) { return m->packed; });
      std::fprintf(stderr, "repacked %zu matrices: %.1f MiB in %.3f s (%.1f MiB of stored pages released)\n",
                   static_cast<size_t>(repacked), static_cast<double>(w.packed_bytes) / (1 << 20), repack_seconds_,
                   static_cast<double>(released_stored_bytes_) / (1 << 20));
    }
  }
}

bool Model::PromptsTakeBf16() const { return parallm::PromptsTakeBf16(loaded_.config, loaded_.weights); }

AttentionShape AttentionShapeOf(const ModelConfig& c, int layer) {
  return AttentionShape{c.n_heads, c.n_kv_heads, c.head_dim, c.AttentionScale(),
                        c.LayerIsSliding(layer) ? c.sliding_window : 0, c.attn_softcap};
}

bool PromptsTakeBf16(const ModelConfig& c, const ModelWeights& weights) {
  auto quantized = [&] {
    for (const LayerWeights& l : weights.layers)
      for (const MatrixView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.moe.shared_gate,
                                  &l.moe.shared_up, &l.moe.shared_down, &l.mamba.in_proj, &l.mamba.out_proj})
        if (Bf16FormulaCovers(*w)) return true;
    return false;
  };
  if (!Bf16PromptsWanted() || !quantized()) return false;
  if (Bf16RowsEnabled()) return true;
  for (int l = 0; l < c.n_layers; ++l)
    if ((!c.hybrid() || c.KindOf(l) == LayerKind::kAttention) && PromptAttentionCovers(AttentionShapeOf(c, l)))
      return true;
  return false;
}

KvStorageShape Model::KvShape(int num_blocks, int block_size, KvDtype dtype) const {
  const ModelConfig& c = loaded_.config;
  int kv_layers = c.n_layers;
  if (c.hybrid()) kv_layers = std::max<int>(1, static_cast<int>(std::count(c.layer_pattern.begin(), c.layer_pattern.end(), '*')));
  return KvStorageShape{kv_layers, c.n_kv_heads, c.head_dim, block_size, num_blocks, dtype};
}

KvDtype AutoKvDtype(const ModelWeights& weights) {
  for (const LayerWeights& l : weights.layers)
    for (const MatrixView* w : {&l.wk, &l.wv})
      if (w->rows > 0 && (w->kind != MatrixView::Kind::kDense || w->dtype != DType::kF32)) return KvDtype::kF16;
  return KvDtype::kF32;
}

SsmStateShape Model::StateShape(int num_slots) const {
  const ModelConfig& c = loaded_.config;
  PARALLM_CHECK(c.hybrid());
  SsmStateShape s;
  for (int l = 0; l < c.n_layers; ++l) s.has_state.push_back(c.KindOf(l) == LayerKind::kMamba ? 1 : 0);
  s.conv_floats = static_cast<int64_t>(c.ssm_conv_kernel - 1) * c.ssm_conv_dim();
  s.ssm_floats = static_cast<int64_t>(c.ssm_inner()) * c.ssm_state;
  s.num_slots = num_slots;
  return s;
}

namespace {

template <class Allocator>
void Resize(std::vector<float, Allocator>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// How many of a sequence's tokens in the step, its first ones, take the bf16 formula (positions below Bf16PromptEnd).
int32_t PromptRowsOf(const SequenceSlice& seq) {
  const int64_t first = seq.context_len - seq.num_tokens;
  return static_cast<int32_t>(std::clamp<int64_t>(Bf16PromptEnd(seq.num_prompt_tokens) - first, 0, seq.num_tokens));
}

// The rows of a step whose tokens take the bf16 formula (positions below Bf16PromptEnd of their request's prompt),
// merged into sorted runs: where MatMul's bf16 formula is on (Bf16RowsEnabled), these take it. A token's formula so
// depends only on its own request (its position against the request's prompt length), never on the batch it runs in,
// how its prompt was chunked, or on being recomputed after a preemption (generated tokens stay int8), so batched
// results still equal unbatched ones.
void PromptRows(const ForwardBatch& batch, std::vector<RowRange>* rows) {
  rows->clear();
  for (const SequenceSlice& seq : batch.sequences) {
    const int32_t n = PromptRowsOf(seq);
    if (n > 0) rows->push_back(RowRange{seq.token_begin, seq.token_begin + n});
  }
  std::sort(rows->begin(), rows->end(), [](const RowRange& a, const RowRange& b) { return a.begin < b.begin; });
  size_t out = 0;
  for (const RowRange& r : *rows) {
    if (out > 0 && (*rows)[out - 1].end == r.begin) {
      (*rows)[out - 1].end = r.end;
    } else {
      (*rows)[out++] = r;
    }
  }
  rows->resize(out);
}

}  // namespace

// The sublayers over one step's batch; the family's block (ArchSpec::block) composes them per layer.
class Model::Ops final : public LayerOps {
 public:
  Ops(Model& m, const ForwardBatch& batch, PagedKvStorage& kv, SsmStateStorage* state, ThreadPool* pool)
      : m_(m), c_(m.loaded_.config), batch_(batch), kv_(kv), state_(state), pool_(pool), T_(batch.num_tokens()) {}

  float* residual() override { return m_.x_.data(); }
  float* scratch() override { return m_.xn_.data(); }
  const ModelConfig& config() const override { return c_; }

  void Mamba(int layer, const float* in, float* out) override {
    PARALLM_CHECK_MSG(state_ != nullptr, "a hybrid model run without its state storage");
    MambaMixer(c_, m_.loaded_.weights.layers[static_cast<size_t>(layer)].mamba, layer, batch_, in, out, *state_,
               m_.mamba_, pool_, m_.prompt_rows_);
  }

  void Norm(const std::vector<float>& w, const float* in, float* out) override {
    const int64_t H = c_.hidden;
    ForTokenRanges([&](int64_t t0, int64_t t1) { RmsNorm(in + t0 * H, w.data(), c_.rms_eps, t1 - t0, H, out + t0 * H); });
  }

  void AddToResidual(const float* y) override {
    const int64_t H = c_.hidden;
    float* x = m_.x_.data();
    ForTokenRanges([&](int64_t t0, int64_t t1) { AddInPlace(x + t0 * H, y + t0 * H, (t1 - t0) * H); });
  }

  void Attention(int layer, const float* in, float* out) override {
    const LayerWeights& lw = m_.loaded_.weights.layers[static_cast<size_t>(layer)];
    const int64_t Q = c_.q_dim(), KV = c_.kv_dim();
    float *q = m_.q_.data(), *k = m_.k_.data(), *v = m_.v_.data();
    const MatMulOut qkv[] = {{&lw.wq, q, Q}, {&lw.wk, k, KV}, {&lw.wv, v, KV}};
    MatMulMulti(qkv, in, T_, pool_, m_.prompt_rows_);
    // The biases (Qwen2's) go on before the adapters' updates. Without adapters each token's are added in its
    // prologue task below, over the pool: on the calling thread alone they were ~0.5% of a batched decode step
    // that the other thread spent waiting.
    const bool bias_per_token = m_.lora_.empty();
    if (!bias_per_token) {
      AddBias(q, lw.q_bias, T_);
      AddBias(k, lw.k_bias, T_);
      AddBias(v, lw.v_bias, T_);
      const LoraBatch::Out lora_qkv[] = {{LoraTarget::kQ, q}, {LoraTarget::kK, k}, {LoraTarget::kV, v}};
      m_.lora_.Apply(layer, lora_qkv, in, pool_);
    }
    // Per token: its biases, q/k norms, RoPE, and the cache write, as (token, half) tasks over the pool: half 0
    // finishes q and k and writes the keys, half 1 writes the values. Each row's operations are the same whatever the
    // split. On one thread this was a tenth of a batched step with 8 KV heads of 128: a slot's first write faults in
    // its pages (4 KiB of keys and 4 KiB of values per token and layer), and the other thread waited.
    const int rot = c_.rotary();
    const float mscale = c_.rope_longrope ? c_.rope_longrope->attn_factor : 1.0f;
    const bool rope = !c_.hybrid();  // Nemotron-H's attention layers have no position embedding
    const int kv_layer = m_.KvLayer(layer);
    auto prologue = [&](int64_t task, int) {
      const int64_t t = task / 2;
      const int64_t slot = batch_.slot_mapping[static_cast<size_t>(t)];
      PARALLM_CHECK(slot >= 0 && slot < kv_.num_slots());
      if (task % 2 == 1) {
        if (bias_per_token) AddBias(v + t * KV, lw.v_bias, 1);
        kv_.Write(kv_layer, slot, nullptr, v + t * KV);
        return;
      }
      float *qt = q + t * Q, *kt = k + t * KV;
      if (bias_per_token) {
        AddBias(qt, lw.q_bias, 1);
        AddBias(kt, lw.k_bias, 1);
      }
      if (c_.qk_norm) {
        RmsNorm(qt, lw.q_norm.data(), c_.rms_eps, c_.n_heads, c_.head_dim, qt);
        RmsNorm(kt, lw.k_norm.data(), c_.rms_eps, c_.n_kv_heads, c_.head_dim, kt);
      }
      if (rope) ApplyRope(qt, c_.n_heads, kt, c_.n_kv_heads, c_.head_dim, rot, m_.RopeCosSinFor(batch_, t, layer),
                          c_.rope_style);
      if (mscale != 1.0f) {  // LongRoPE's attention factor scales the rotated dims (cos and sin) of q and k
        ScaleRotated(qt, c_.n_heads, c_.head_dim, rot, mscale);
        ScaleRotated(kt, c_.n_kv_heads, c_.head_dim, rot, mscale);
      }
      kv_.Write(kv_layer, slot, kt, nullptr);
    };
    if (pool_ != nullptr) {
      pool_->ParallelFor(2 * T_, prologue);
    } else {
      for (int64_t i = 0; i < 2 * T_; ++i) prologue(i, 0);
    }
    m_.Attention(batch_, layer, kv_, pool_);
    MatMul(lw.wo, m_.attn_.data(), T_, out, c_.hidden, pool_, m_.prompt_rows_);
    Lora(layer, LoraTarget::kO, m_.attn_.data(), out);
  }

  void Mlp(int layer, const float* in, float* out) override {
    const LayerWeights& lw = m_.loaded_.weights.layers[static_cast<size_t>(layer)];
    GatedMlp(lw.w_gate, lw.w_up, lw.w_down, in, T_, m_.gate_.data(), m_.up_.data(), out, pool_, layer,
             m_.prompt_rows_);
  }

  // Every token of the batch is routed (f32 router), the assignments are grouped by expert, and each active expert
  // runs its gated MLP once over its group (its weights read once for the whole batch). Each token's output is the
  // sum of its experts' outputs in its own rank order (then the shared expert), so it does not depend on the batch.
  void Moe(int layer, const float* in, float* out) override {
    const MoeWeights& moe = m_.loaded_.weights.layers[static_cast<size_t>(layer)].moe;
    const int64_t H = c_.hidden, F = c_.expert_ffn, E = moe.n_experts(), k = c_.n_experts_used, A = T_ * k;
    Resize(m_.router_logits_, T_ * E);
    MatMul(moe.router, in, T_, m_.router_logits_.data(), E, pool_);
    ExpertRouting& r = m_.routing_;
    if (c_.hybrid()) {
      const SigmoidRouting p{static_cast<int>(E), static_cast<int>(k), c_.moe_groups, c_.moe_topk_groups,
                             c_.norm_topk_prob, c_.routed_scaling};
      RouteTokensSigmoid(m_.router_logits_.data(), moe.score_bias.empty() ? nullptr : moe.score_bias.data(), T_, p, &r);
    } else {
      RouteTokens(m_.router_logits_.data(), T_, static_cast<int>(E), static_cast<int>(k), c_.norm_topk_prob, &r,
                  pool_);
    }
    Resize(m_.moe_y_, A * H);
    Resize(m_.moe_gate_, A * F);
    Resize(m_.moe_up_, A * F);
    float *y = m_.moe_y_.data(), *g = m_.moe_gate_.data(), *u = m_.moe_up_.data();
    // All active experts in two parallel loops over (expert, row block) work items: gate and up of every expert
    // over the tokens gathered in expert order (each token quantized once, not once per expert it went to), the
    // activation, then every expert's down. With one or two tokens an expert (decode) each product is small, so
    // only the whole layer's work cut in blocks keeps the threads busy.
    // Each output is what a MatMul of the expert over its group gives, bit for bit, however the work is cut.
    std::vector<MatMulGroupOut>& products = m_.expert_products_;
    products.clear();
    const bool gated = !moe.gate.empty();
    for (int32_t e = 0; e < E; ++e) {
      const int64_t first = r.offsets[static_cast<size_t>(e)], n = r.offsets[static_cast<size_t>(e) + 1] - first;
      if (n == 0) continue;
      if (gated) products.push_back({&moe.gate[static_cast<size_t>(e)], first, n, g + first * F, F});
      products.push_back({&moe.up[static_cast<size_t>(e)], first, n, u + first * F, F});
    }
    MatMulGroupedGather(products, in, T_, r.token.data(), A, pool_);
    // Gated experts: act(gate) * up into g. Nemotron-H's are ungated: relu(up)^2, into g as well.
    if (gated) {
      Activate(g, u, A * F, pool_);
    } else {
      Elementwise(A * F, pool_, [&](int64_t b, int64_t e) { ReluSquared(u + b, e - b, g + b); });
    }
    products.clear();
    for (int32_t e = 0; e < E; ++e) {
      const int64_t first = r.offsets[static_cast<size_t>(e)], n = r.offsets[static_cast<size_t>(e) + 1] - first;
      if (n > 0) products.push_back({&moe.down[static_cast<size_t>(e)], first, n, y + first * H, H});
    }
    MatMulGrouped(products, g, A, pool_);
    // The shared expert (Qwen2-MoE, Nemotron-H) reads `in`, which `out` may overwrite: computed first, with its gate
    // (Qwen2-MoE's sigmoid(x . gate); Nemotron-H's has none: scale 1).
    const bool shared = moe.shared_up.rows > 0;
    float* sh = m_.xs_.data();
    if (shared) {
      Resize(m_.shared_scale_, T_);
      for (int64_t t = 0; t < T_ && moe.shared_expert_gate.empty(); ++t) m_.shared_scale_[static_cast<size_t>(t)] = 1.0f;
      for (int64_t t = 0; t < T_ && !moe.shared_expert_gate.empty(); ++t) {
        float dot = 0;
        for (int64_t i = 0; i < H; ++i) dot += in[t * H + i] * moe.shared_expert_gate[static_cast<size_t>(i)];
        m_.shared_scale_[static_cast<size_t>(t)] = 1.0f / (1.0f + std::exp(-dot));
      }
      GatedMlp(moe.shared_gate, moe.shared_up, moe.shared_down, in, T_, m_.gate_.data(), m_.up_.data(), sh, pool_,
               -1, m_.prompt_rows_);
    }
    // The combine: per token its experts' rows in rank order, then the shared expert's (WeightedRowSum's order). It
    // moves A rows of H floats (2 MB a layer at 64 sequences), so it runs over the pool in token ranges.
    constexpr int64_t kMaxTerms = 64;
    PARALLM_CHECK(k + 1 <= kMaxTerms);
    ForTokenRanges([&](int64_t t0, int64_t t1) {
      const float* rows[kMaxTerms];
      float weights[kMaxTerms];
      for (int64_t t = t0; t < t1; ++t) {
        for (int64_t j = 0; j < k; ++j) {
          weights[j] = r.weight[static_cast<size_t>(t * k + j)];
          rows[j] = y + static_cast<int64_t>(r.position[static_cast<size_t>(t * k + j)]) * H;
        }
        if (shared) {
          weights[k] = m_.shared_scale_[static_cast<size_t>(t)];
          rows[k] = sh + t * H;
        }
        WeightedRowSum(rows, weights, static_cast<int>(shared ? k + 1 : k), H, out + t * H);
      }
    });
  }

 private:
  // fn(t0, t1) over the step's tokens [0, T): in contiguous ranges over the pool when the batch is large enough to
  // pay for the hand-off (a 512-token prefill spent ~3% of its time in one thread's norms), else at once. Norms,
  // residual adds and the experts' combine use it. Each
  // token's operations are the same however the tokens are cut.
  void ForTokenRanges(const std::function<void(int64_t, int64_t)>& fn) {
    const int64_t parts = pool_ != nullptr && T_ >= 8 ? std::min<int64_t>(pool_->num_threads() * 2, T_) : 1;
    if (parts == 1) return fn(0, T_);
    pool_->ParallelFor(parts, [&](int64_t part, int) {
      auto [b, e] = SplitRange(T_, parts, part);
      fn(b, e);
    });
  }

  // out = down · (act(gate in) * up in) for n rows; gate/up scratch [n, up.rows]; an empty `w_gate` (Nemotron-H's
  // ungated MLPs and experts) means out = down · relu(up in)^2 (the gate scratch is unused). out may be in. With
  // `lora_layer` >= 0 (a dense MLP) the step's LoRA updates of that layer's gate, up and down projections are added;
  // experts take none (adapters on expert layers are refused when they load). `bf16_rows`: MatMul's (a dense MLP: the
  // step's prompt rows).
  void GatedMlp(const MatrixView& w_gate, const MatrixView& w_up, const MatrixView& w_down, const float* in,
                int64_t n, float* gate, float* up, float* out, ThreadPool* pool, int lora_layer = -1,
                std::span<const RowRange> bf16_rows = {}) {
    if (w_gate.rows == 0) {
      const int64_t F = w_up.rows;
      MatMul(w_up, in, n, up, F, pool, bf16_rows);
      Elementwise(n * F, pool, [&](int64_t b, int64_t e) { ReluSquared(up + b, e - b, up + b); });
      MatMul(w_down, up, n, out, c_.hidden, pool, bf16_rows);
      return;
    }
    const int64_t F = w_gate.rows;
    const MatMulOut gate_up[] = {{&w_gate, gate, F}, {&w_up, up, F}};
    if (!bf16_rows.empty() && (lora_layer < 0 || m_.lora_.empty()) && GatedMlpBf16Covers(w_gate, w_up, w_down)) {
      // The listed rows in one fused pass (their f32 gate and up never written); the others as below.
      MatMulMultiExcept(gate_up, in, n, pool, bf16_rows);
      int64_t next = 0;
      for (const RowRange& r : bf16_rows) {
        Activate(gate + next * F, up + next * F, (r.begin - next) * F, pool);
        next = r.end;
      }
      Activate(gate + next * F, up + next * F, (n - next) * F, pool);
      const MatMulOut down[] = {{&w_down, out, c_.hidden}};
      MatMulMultiExcept(down, gate, n, pool, bf16_rows);
      GatedMlpBf16(w_gate, w_up, w_down, ActMul(), in, bf16_rows, out, c_.hidden, pool);
      return;
    }
    if ((lora_layer < 0 || m_.lora_.empty()) && (bf16_rows.empty() || !Bf16RowsEnabled())) {
      // Every row on the int8 formula and no adapter to add before the activation: act(gate) * up straight from the
      // products (up's outputs never written).
      MatMulGated(w_gate, w_up, ActMul(), in, n, gate, F, pool);
      MatMul(w_down, gate, n, out, c_.hidden, pool);
      return;
    }
    MatMulMulti(gate_up, in, n, pool, bf16_rows);
    if (lora_layer >= 0 && !m_.lora_.empty()) {
      const LoraBatch::Out lora_gate_up[] = {{LoraTarget::kGate, gate}, {LoraTarget::kUp, up}};
      m_.lora_.Apply(lora_layer, lora_gate_up, in, pool);
    }
    Activate(gate, up, n * F, pool);
    MatMul(w_down, gate, n, out, c_.hidden, pool, bf16_rows);
    if (lora_layer >= 0) Lora(lora_layer, LoraTarget::kDown, gate, out);
  }

  // The model's activation times up (GatedMlpBf16 runs it on tiles; Activate on whole outputs).
  ActMulFn ActMul() const { return c_.activation == Activation::kGeluTanh ? &GeluTanhMul : &SiluMul; }

  // gate[i] = act(gate[i]) * up[i] for i < n. Elementwise (each value computed the same way whatever the split): over
  // the pool when it is large (32 tokens x 4864 is ~155K exps per layer, a few percent of a batched step on one thread).
  void Activate(float* gate, const float* up, int64_t n, ThreadPool* pool) {
    const ActMulFn act = ActMul();
    Elementwise(n, pool, [&](int64_t b, int64_t e) { act(gate + b, up + b, e - b, gate + b); });
  }

  // fn(b, e) over [0, n) for elementwise work, in chunks over the pool when n is large, else at once.
  static void Elementwise(int64_t n, ThreadPool* pool, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    if (pool != nullptr && n >= 32768) {
      const int64_t chunks = std::min<int64_t>(pool->num_threads() * 4, n / 8192);
      pool->ParallelFor(chunks, [&](int64_t i, int) {
        auto [b, e] = SplitRange(n, chunks, i);
        fn(b, e);
      });
    } else {
      fn(0, n);
    }
  }

  // Adds the LoRA updates of the step's adapters to a projection's output (after the shared base product).
  void Lora(int layer, LoraTarget target, const float* in, float* out) {
    if (!m_.lora_.empty()) m_.lora_.Apply(layer, target, in, out, pool_);
  }

  static void AddBias(float* x, const std::vector<float>& bias, int64_t n_rows) {
    if (bias.empty()) return;
    const int64_t n = static_cast<int64_t>(bias.size());
    for (int64_t r = 0; r < n_rows; ++r) AddInPlace(x + r * n, bias.data(), n);
  }

  static void ScaleRotated(float* x, int n_heads, int head_dim, int rotary_dim, float scale) {
    for (int h = 0; h < n_heads; ++h)
      for (int i = 0; i < rotary_dim; ++i) x[static_cast<int64_t>(h) * head_dim + i] *= scale;
  }

  Model& m_;
  const ModelConfig& c_;
  const ForwardBatch& batch_;
  PagedKvStorage& kv_;
  SsmStateStorage* state_;
  ThreadPool* pool_;
  const int64_t T_;
};

const float* Model::RopeCosSinFor(const ForwardBatch& batch, int64_t t, int layer) const {
  const ModelConfig& c = loaded_.config;
  int64_t set = 0;  // rope_cs_'s part: inv_freq_, inv_freq_local_ or inv_freq_long_
  if (!inv_freq_local_.empty() && c.LayerIsSliding(layer)) {
    set = 1;
  } else if (!inv_freq_long_.empty()) {
    const SequenceSlice& seq = batch.sequences[static_cast<size_t>(token_seq_[static_cast<size_t>(t)])];
    const int64_t prompt = seq.num_prompt_tokens > 0 ? seq.num_prompt_tokens : seq.context_len;
    const int64_t len = std::max<int64_t>(prompt, batch.positions[static_cast<size_t>(t)] + 1);
    if (len > c.rope_longrope->original_max_position) set = 2;
  }
  return rope_cs_.data() + (set * batch.num_tokens() + t) * c.rotary();
}

void Model::Forward(const ForwardBatch& batch, PagedKvStorage& kv, float* logits, ThreadPool* pool,
                    SsmStateStorage* state) {
  const ModelConfig& c = loaded_.config;
  const int64_t n_out = RunToHead(batch, kv, pool, state);
  if (n_out == 0) return;
  MatMul(loaded_.weights.output, xn_.data(), n_out, logits, c.vocab, pool);
  if (c.final_softcap > 0) SoftCap(logits, n_out * c.vocab, c.final_softcap);
}

void Model::ForwardArgMax(const ForwardBatch& batch, PagedKvStorage& kv, int32_t* argmax, ThreadPool* pool,
                          SsmStateStorage* state) {
  const int64_t n_out = RunToHead(batch, kv, pool, state);
  if (n_out > 0) MatMulArgMax(loaded_.weights.output, xn_.data(), n_out, loaded_.config.final_softcap, argmax, pool);
}

int64_t Model::RunToHead(const ForwardBatch& batch, PagedKvStorage& kv, ThreadPool* pool, SsmStateStorage* state) {
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
  Resize(gate_, T * std::max(F, static_cast<int64_t>(c.shared_expert_ffn)));
  Resize(up_, T * std::max(F, static_cast<int64_t>(c.shared_expert_ffn)));
  if (c.shared_expert_ffn > 0) Resize(xs_, T * H);

  token_seq_.assign(static_cast<size_t>(T), -1);
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const SequenceSlice& seq = batch.sequences[s];
    PARALLM_CHECK(seq.token_begin >= 0 && seq.token_begin + seq.num_tokens <= T);
    for (int32_t i = 0; i < seq.num_tokens; ++i) token_seq_[static_cast<size_t>(seq.token_begin + i)] = static_cast<int32_t>(s);
  }
  if (!c.hybrid()) {  // RoPE's angles, once a step for every layer (Nemotron-H's attention has no RoPE)
    const int64_t rot = c.rotary();
    Resize(rope_cs_, 3 * T * rot);
    const std::vector<float>* sets[] = {&inv_freq_, &inv_freq_local_, &inv_freq_long_};
    for (int64_t set = 0; set < 3; ++set)
      if (!sets[set]->empty())
        for (int64_t t = 0; t < T; ++t)
          RopeCosSin(static_cast<int>(rot), batch.positions[static_cast<size_t>(t)], sets[set]->data(),
                     rope_cs_.data() + (set * T + t) * rot);
  }
  const float embed_scale = c.EmbedScale();
  for (int64_t t = 0; t < T; ++t) {
    PARALLM_CHECK_MSG(token_seq_[static_cast<size_t>(t)] >= 0, "token not covered by any sequence");
    PARALLM_CHECK(batch.tokens[static_cast<size_t>(t)] >= 0 && batch.tokens[static_cast<size_t>(t)] < c.vocab);
    float* row = x_.data() + t * H;
    DequantizeMatrixRow(w.token_embd, batch.tokens[static_cast<size_t>(t)], row);
    if (embed_scale != 1.0f)
      for (int64_t i = 0; i < H; ++i) row[i] *= embed_scale;
  }

  if (Bf16RowsEnabled()) {
    PromptRows(batch, &prompt_rows_);
  } else {
    prompt_rows_.clear();
  }
  // A decode-only step has no prompt rows, and skips the scan of the weights.
  prompt_attention_ = std::any_of(batch.sequences.begin(), batch.sequences.end(),
                                  [](const SequenceSlice& s) { return PromptRowsOf(s) > 0; }) &&
                      PromptsTakeBf16();
  lora_.Build(batch);
  for (const SequenceSlice& seq : batch.sequences)
    PARALLM_CHECK_MSG(seq.adapter == nullptr || static_cast<int>(seq.adapter->layers.size()) == c.n_layers,
                      "a LoRA adapter loaded for another model");
  if (c.hybrid()) {
    PARALLM_CHECK_MSG(state != nullptr, "a hybrid model needs its state storage");
    for (const SequenceSlice& seq : batch.sequences) {
      PARALLM_CHECK_MSG(seq.state_slot >= 0 && seq.state_slot < state->num_slots(), "a sequence without a state slot");
      // A sequence (re)starting at position 0 starts from the zero state: new requests and preempted ones alike.
      if (seq.num_tokens > 0 && seq.context_len == seq.num_tokens) state->Reset(seq.state_slot);
    }
  }
  Ops ops(*this, batch, kv, state, pool);
  const LayerBlock block = SpecFor(c.arch).block;
  for (int l = 0; l < c.n_layers; ++l) block(ops, w.layers[static_cast<size_t>(l)], l);

  // Only the requested tokens go through the final norm and the LM head (the largest matrix).
  const int64_t n_out = static_cast<int64_t>(batch.logits_indices.size());
  for (int64_t i = 0; i < n_out; ++i) {
    int32_t t = batch.logits_indices[static_cast<size_t>(i)];
    PARALLM_CHECK(t >= 0 && t < T);
    RmsNorm(x_.data() + t * H, w.output_norm.data(), c.rms_eps, 1, H, xn_.data() + i * H);
  }
  return n_out;
}

// The runs of a sequence's first n tokens of the step (its bf16 prompt rows) for PromptAttention: one per KV head, or,
// with fewer KV heads than threads, up to n_threads / n_kv_heads per head, cut at whole tiles of 16 tokens into parts
// of about equal cost (a later token reads more positions; each part gathers the keys and values it reads).
void Model::AddPromptRuns(const ForwardBatch& batch, const SequenceSlice& seq, int32_t n, int n_kv_heads,
                          int n_threads) {
  if (n <= 0) return;
  const int64_t first_ctx = batch.positions[static_cast<size_t>(seq.token_begin)] + 1;
  PARALLM_CHECK(batch.positions[static_cast<size_t>(seq.token_begin + n - 1)] + 1 == first_ctx + n - 1);
  const int32_t tiles = (n + 15) / 16;
  const int parts = std::clamp((n_threads + n_kv_heads - 1) / n_kv_heads, 1, tiles);
  auto cost = [&](int32_t a, int32_t b) {  // positions read by tokens [a, b)
    return static_cast<int64_t>(b - a) * (2 * first_ctx + a + b - 1) / 2;
  };
  const int64_t total = cost(0, n);
  int32_t begin = 0;
  for (int p = 1; p <= parts && begin < n; ++p) {
    int32_t end = p == parts ? n : std::min(n, begin + 16);
    while (end < n && cost(0, end) * parts < total * p) end = std::min(n, end + 16);
    for (int kvh = 0; kvh < n_kv_heads; ++kvh)
      attention_runs_.push_back({seq.token_begin + begin, end - begin, kvh, cost(begin, end), true});
    begin = end;
  }
}

// Causal grouped-query attention for every token, split into tasks across threads: one per KV head and run of
// consecutive tokens of one sequence (a prefill chunk goes in runs of kAttentionTokenBlock tokens, which read each
// key and value row once per run; a decode token alone, or with all its KV heads where there are enough decode
// tokens, see below), heaviest first so that the threads finish together. Each
// token reads keys and values through its sequence's block table, and its result depends only on that token's
// sequence (PagedAttentionTokens gives a token the same bits in any run as alone), whatever the batch or the split.
// A prompt's rows that take the bf16 formula (PromptRows) take PromptAttention where the layer's shape allows, in as
// few runs as keep the threads busy (each gathers its KV head's keys and values once), with the same guarantee.
void Model::Attention(const ForwardBatch& batch, int layer, PagedKvStorage& kv, ThreadPool* pool) {
  const ModelConfig& c = loaded_.config;
  const int64_t Q = c.q_dim();
  const AttentionShape shape = AttentionShapeOf(c, layer);
  const PagedKvView view = kv.View(KvLayer(layer));
  const int n_threads = pool ? pool->num_threads() : 1;
  if (static_cast<int>(scores_.size()) < n_threads) scores_.resize(static_cast<size_t>(n_threads));

  attention_runs_.clear();
  const bool prompt_formula = prompt_attention_ && PromptAttentionCovers(shape);
  for (const SequenceSlice& seq : batch.sequences) {
    int32_t i = 0;
    if (prompt_formula) {
      i = PromptRowsOf(seq);
      AddPromptRuns(batch, seq, i, c.n_kv_heads, n_threads);
    }
    for (; i < seq.num_tokens;) {
      // A run: up to kAttentionTokenBlock tokens at consecutive positions.
      const int32_t first = seq.token_begin + i;
      int32_t n = 1;
      while (n < kAttentionTokenBlock && i + n < seq.num_tokens &&
             batch.positions[static_cast<size_t>(first + n)] == batch.positions[static_cast<size_t>(first)] + n)
        ++n;
      const int64_t last_ctx = batch.positions[static_cast<size_t>(first + n - 1)] + 1;
      for (int kvh = 0; kvh < c.n_kv_heads; ++kvh) attention_runs_.push_back({first, n, kvh, n * last_ctx});
      i += n;
    }
  }
  // A decode token's KV heads in one task where there are decode tokens enough to keep the threads busy (4 a thread):
  // a slot holds every head's row side by side, so the core that reads a block then takes its lines whole (the next
  // head's rows arrive with the hardware's prefetch), where two cores had read alternate rows of the same blocks at
  // once: `kernels_bench --benchmark_filter='PagedAttention/avx512/f16(/3b)?/ctx:256/seqs:512/threads'` reads 23%
  // (16% on the 3B shape) less time with the heads together. With fewer decode tokens a task per head keeps the
  // threads busy.
  const int64_t decode_runs = std::count_if(attention_runs_.begin(), attention_runs_.end(),
                                            [](const AttentionRun& r) { return !r.prompt && r.num_tokens == 1; });
  if (c.n_kv_heads > 1 && decode_runs >= int64_t{4} * n_threads * c.n_kv_heads) {
    std::erase_if(attention_runs_,
                  [](const AttentionRun& r) { return !r.prompt && r.num_tokens == 1 && r.kv_head > 0; });
    for (AttentionRun& r : attention_runs_) {
      if (r.prompt || r.num_tokens != 1) continue;
      r.kv_heads = c.n_kv_heads;
      r.cost *= c.n_kv_heads;
    }
  }
  std::stable_sort(attention_runs_.begin(), attention_runs_.end(),
                   [](const AttentionRun& a, const AttentionRun& b) { return a.cost > b.cost; });

  auto task = [&](int64_t index, int thread) {
    const AttentionRun& run = attention_runs_[static_cast<size_t>(index)];
    const int64_t t = run.first_token;
    const SequenceSlice& seq = batch.sequences[static_cast<size_t>(token_seq_[static_cast<size_t>(t)])];
    const int64_t n_ctx = batch.positions[static_cast<size_t>(t)] + 1;  // causal: positions [0, pos]
    const int64_t n_ctx_last = n_ctx + run.num_tokens - 1;
    PARALLM_CHECK(n_ctx_last <= seq.context_len);
    PARALLM_CHECK(n_ctx_last <= static_cast<int64_t>(seq.block_table.size()) * view.block_size);
    std::vector<float>& scores = scores_[static_cast<size_t>(thread)];
    if (run.prompt) {
      const int64_t bytes = PromptAttentionScratchBytes(shape, n_ctx_last);
      Resize(scores, (bytes + 3) / 4);
      PromptAttention(q_.data() + t * Q, Q, shape, view, seq.block_table, n_ctx, run.num_tokens, run.kv_head,
                      std::span<uint8_t>(reinterpret_cast<uint8_t*>(scores.data()), static_cast<size_t>(bytes)),
                      attn_.data() + t * Q, Q);
      return;
    }
    const int64_t scratch = run.num_tokens == 1 ? PagedAttentionScratchSize(shape, n_ctx)
                                                : PagedAttentionTokensScratchSize(shape, n_ctx_last, run.num_tokens);
    if (static_cast<int64_t>(scores.size()) < scratch) scores.resize(static_cast<size_t>(scratch));
    const int kv_end = run.kv_head + run.kv_heads;
    if (run.num_tokens == 1) {
      PagedAttention(q_.data() + t * Q, shape, view, seq.block_table, n_ctx, run.kv_head, kv_end, scores,
                     attn_.data() + t * Q);
    } else {
      PagedAttentionTokens(q_.data() + t * Q, Q, shape, view, seq.block_table, n_ctx, run.num_tokens, run.kv_head,
                           kv_end, scores, attn_.data() + t * Q, Q);
    }
  };
  const int64_t n_tasks = static_cast<int64_t>(attention_runs_.size());
  if (pool != nullptr) {
    pool->ParallelFor(n_tasks, task);
  } else {
    for (int64_t i = 0; i < n_tasks; ++i) task(i, 0);
  }
}

}  // namespace parallm
