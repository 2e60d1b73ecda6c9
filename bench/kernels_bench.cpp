// MatMul and PagedAttention microbenchmarks on Qwen2.5-0.5B's shapes. MatMul: per weight type, kernel path, token
// count and threads; counters GOP/s (2 * rows * cols * tokens per second) and GB/s of weight bytes streamed.
// PagedAttention: per kernel width and context; counter GB/s of keys and values read (see BM_PagedAttention).
//
//   build-kern/bench/kernels_bench --benchmark_filter='MatMul/q8_0/avx512/.*' --benchmark_min_time=0.3
//
// Benchmark names: MatMul/<type>/<isa>/<shape>/tokens:<n>/threads:<t> (isa amx-bf16: every token through the
// bf16 formula, as a prompt's tokens are), shape one of
//   up   = 4864 x 896   (FFN gate/up: 4864 rows, 896 columns)
//   down = 896 x 4864   (FFN down)
//   head = 151936 x 896 (LM head, a quarter of the model's weights)
//   l2   = 512 x 1024   (fits in L2: the kernel's compute ceiling, no memory stalls)
//   up3b = 8192 x 3072, down3b = 3072 x 8192 (Llama 3.2 3B's MLP: wider rows, several column chunks a row group)
// K-quants need columns in multiples of 256, so they skip up and head (896 columns).
//
//   build-kern/bench/kernels_bench --benchmark_filter='PagedAttention/.*' --benchmark_repetitions=5
//
// ExpertsGrouped/<q4_k|mlx4g64>[/down]/per_expert:<n>/threads:<t>: a mixture-of-experts layer's gate and up, or its
// down (BM_ExpertsGrouped).
//
// PagedAttention/<isa>[/f16|/bf16|/int8][/3b]/ctx:<n_ctx>/seqs:<n>: one decode token per sequence, 14 query / 2 KV
// heads, head_dim 64 (/3b: Llama 3.2 3B's 24 / 8 heads, head_dim 128), blocks of 16 positions; keys and values in f32,
// or stored as f16, bf16 or int8 (--kv-cache-dtype). .../threads:2/heads:<apart|together>: over two threads, a task
// per sequence and KV head or per sequence (see BM_PagedAttention).
// PagedAttentionPrefill/...: a prefill chunk's tokens one by one, in runs (PagedAttentionTokens), or as a prompt's
// bf16 rows (PromptAttention, bf16/...: on AMX tiles, or as AVX512-BF16 pairs where there is no AMX).
//
// GatedMlp/<q8_0|q4_0|mlx4g64>/<fused|parts>/tokens:<n>/threads:<t> (AMX-BF16 machines only): a dense gated MLP's
// prompt rows on the bf16 formula, gate and up 4864 x 896 and down 896 x 4864, as GatedMlpBf16 makes them or as its
// parts (gate and up to f32 outputs, SiluMul, down); counter GOP/s over the three products.
//
// QuantizeActs/<isa>/cols:<c>/tokens:<n>: the int8 path's activation quantizer alone (one thread), on the inputs of
// the 0.5B shape's projections (896) and its down projection (4,864); counter blocks/s (32 values each).
//
// AmxProbe/<case> (AMX machines only): whether the tile unit and the vector units work at once (amx_probe.cpp).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "amx_probe.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/kv_dtype.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/ops.h"
#include "kernels/prompt_attention.h"
#include "tensor/mlx_affine.h"
#include "tensor/quant.h"
#include "util/thread_pool.h"
#include "util/zeroed_pages.h"

namespace parallm {
namespace {

struct WType {
  std::string name;
  DType dtype;
  bool mlx = false;
  MlxAffineParams p{};
};

struct Shape {
  std::string name;
  int64_t rows, cols;
};

// Weights of one type and shape; only the most recent one is kept (the LM head is 0.1-0.6 GB).
struct Weights {
  std::vector<uint8_t> data, scales, biases;
  MatrixView view;
  size_t bytes = 0;
};

// 256 distinct random rows, repeated: streaming cost does not depend on the values.
std::shared_ptr<Weights> MakeWeights(const WType& t, const Shape& s) {
  static std::string cached_key;
  static std::shared_ptr<Weights> cached;
  std::string key = t.name + "/" + s.name;
  if (key == cached_key) return cached;
  cached.reset();
  auto w = std::make_shared<Weights>();
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> row(static_cast<size_t>(s.cols));
  MatrixView& v = w->view;
  v.rows = s.rows;
  v.cols = s.cols;
  v.dtype = t.dtype;
  const int64_t distinct = 256;
  if (!t.mlx) {
    v.row_bytes = RowBytes(t.dtype, s.cols);
    w->data.resize(v.row_bytes * s.rows);
    for (int64_t r = 0; r < s.rows; ++r) {
      uint8_t* dst = w->data.data() + r * v.row_bytes;
      if (r < distinct) {
        for (float& x : row) x = dist(rng);
        QuantizeRow(t.dtype, row.data(), dst, s.cols);
      } else {
        std::memcpy(dst, w->data.data() + (r % distinct) * v.row_bytes, v.row_bytes);
      }
    }
    w->bytes = w->data.size();
  } else {
    v.kind = MatrixView::Kind::kMlxAffine;
    v.mlx = t.p;
    v.row_bytes = static_cast<size_t>(s.cols * t.p.bits / 8);
    const size_t sb = Info(t.dtype).block_bytes, gb = static_cast<size_t>(s.cols / t.p.group_size) * sb;
    w->data.resize(v.row_bytes * s.rows);
    w->scales.resize(gb * s.rows);
    w->biases.resize(gb * s.rows);
    for (int64_t r = 0; r < s.rows; ++r) {
      if (r < distinct) {
        for (float& x : row) x = dist(rng);
        MlxQuantizeRow(t.p, row.data(), s.cols, t.dtype, reinterpret_cast<uint32_t*>(w->data.data() + r * v.row_bytes),
                       w->scales.data() + r * gb, w->biases.data() + r * gb);
      } else {
        std::memcpy(w->data.data() + r * v.row_bytes, w->data.data() + (r % distinct) * v.row_bytes, v.row_bytes);
        std::memcpy(w->scales.data() + r * gb, w->scales.data() + (r % distinct) * gb, gb);
        std::memcpy(w->biases.data() + r * gb, w->biases.data() + (r % distinct) * gb, gb);
      }
    }
    v.scales = w->scales.data();
    v.biases = w->biases.data();
    w->bytes = w->data.size() + w->scales.size() + w->biases.size();
  }
  v.data = w->data.data();
  cached_key = key;
  cached = w;
  return w;
}

ThreadPool* Pool(int threads) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  auto& p = pools[threads];
  if (!p) p = std::make_unique<ThreadPool>(threads);
  return p.get();
}

void BM_MatMul(benchmark::State& state, WType t, IsaPath isa, Shape s, int64_t n_tokens, int threads, bool packed,
               bool bf16) {
  if (!IsIsaSupported(isa)) {
    state.SkipWithError("path not supported on this CPU");
    return;
  }
  ForceIsa(isa);
  auto w = MakeWeights(t, s);
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tokens * s.cols)), y(static_cast<size_t>(n_tokens * s.rows));
  for (float& v : x) v = dist(rng);
  ThreadPool* pool = threads > 1 ? Pool(threads) : nullptr;
  // packed: the weights repacked once as at model load (RepackForKernels), not counted in the time.
  MatrixView view = w->view;
  std::shared_ptr<uint8_t[]> owner;
  size_t packed_bytes = 0;
  if (packed) {
    owner = RepackForKernels(&view, &packed_bytes);
    if (!owner) {
      state.SkipWithError("this path does not repack this type");
      return;
    }
  }
  // bf16: every token listed in bf16_rows (a prompt's tokens), the bf16 formula on AMX-BF16 tiles.
  if (bf16 && !Bf16RowsEnabled()) {
    state.SkipWithError("no bf16 formula on this CPU");
    return;
  }
  const RowRange all[] = {{0, n_tokens}};
  const std::span<const RowRange> rows = bf16 ? std::span<const RowRange>(all) : std::span<const RowRange>();
  for (auto _ : state) {
    MatMul(view, x.data(), n_tokens, y.data(), s.rows, pool, rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double ops = 2.0 * static_cast<double>(s.rows) * static_cast<double>(s.cols) * static_cast<double>(n_tokens);
  state.counters["GOP/s"] = benchmark::Counter(ops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(packed ? packed_bytes : w->bytes) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
  ForceIsa(BestSupportedIsa());
}

// A paged KV cache of n_blocks blocks with random keys and values (drawn from rng), stored as `dtype` as the cache
// stores it (f32, 16-bit or int8 rows; int8 with one scale per slot and KV head) on huge pages, as the engine's cache
// is (ZeroedPages: on ordinary heap pages each block of a scattered table would cost a TLB miss that the engine does
// not pay); view() is what the kernels read.
struct RandomKvCache {
  RandomKvCache(int64_t n_blocks, int block_size, int n_kv_heads, int head_dim, KvDtype dtype, std::mt19937& rng)
      : slot_floats(n_kv_heads * head_dim), block_size(block_size), dtype(dtype) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> keys(static_cast<size_t>(n_blocks * block_size * slot_floats)), values(keys.size());
    for (float& v : keys) v = dist(rng);
    for (float& v : values) v = dist(rng);
    const size_t rows = keys.size() / head_dim, row_bytes = head_dim * KvElementBytes(dtype);
    const bool scaled = dtype == KvDtype::kInt8;
    stored_keys = ZeroedPages(rows * row_bytes);
    stored_values = ZeroedPages(rows * row_bytes);
    key_scales.resize(scaled ? rows : 0);
    value_scales.resize(key_scales.size());
    for (size_t r = 0; r < rows; ++r) {
      EncodeKvRow(dtype, keys.data() + r * head_dim, head_dim, static_cast<char*>(stored_keys.get()) + r * row_bytes,
                  scaled ? &key_scales[r] : nullptr);
      EncodeKvRow(dtype, values.data() + r * head_dim, head_dim,
                  static_cast<char*>(stored_values.get()) + r * row_bytes, scaled ? &value_scales[r] : nullptr);
    }
  }
  PagedKvView view() const {
    const bool scaled = dtype == KvDtype::kInt8;
    return PagedKvView{stored_keys.get(), stored_values.get(), slot_floats, block_size, dtype,
                       scaled ? key_scales.data() : nullptr, scaled ? value_scales.data() : nullptr};
  }

  int64_t slot_floats;
  int block_size;
  KvDtype dtype;
  ZeroedPages stored_keys, stored_values;
  std::vector<float> key_scales, value_scales;
};

// The heads of an attention benchmark: the 0.5B shape (14 query heads in 2 groups of 7, head_dim 64) unless named
// ("3b": Llama 3.2 3B's 24 query heads in 8 groups of 3, head_dim 128).
struct AttnHeads {
  const char* name;  // "" for the 0.5B shape
  int n_heads, n_kv_heads, head_dim;
};
constexpr AttnHeads kQwen05bHeads{"", 14, 2, 64};
constexpr AttnHeads kLlama3bHeads{"3b", 24, 8, 128};

// One decode token for each of `seqs` sequences of n_ctx positions, all KV heads. One sequence's keys and values
// (n_ctx KiB on the 0.5B shape in f32) stay in cache across iterations: the kernel's compute ceiling. 64 sequences of
// 512 (32 MiB in f32, 16 MiB in f16) fit a large L3; 512 sequences of 256 (128 MiB in f32, 64 MiB in f16) do not: the
// batched-decode case, where every key and value row comes from memory as in a step over all of a model's layers.
// With a pool (threads > 1) the sequences are split as Model::Attention splits a step's decode tokens: a task per
// sequence and KV head (heads:apart), or per sequence with its heads one after another (heads:together, its split
// where there are many decode tokens).
enum class HeadSplit { kSerial, kApart, kTogether };
void BM_PagedAttention(benchmark::State& state, int lanes, int64_t n_ctx, int seqs, KvDtype dtype, AttnHeads heads,
                       HeadSplit split) {
  if (!SetPagedAttentionLanes(lanes)) {
    state.SkipWithError("path not supported on this CPU");
    return;
  }
  const int n_heads = heads.n_heads, n_kv_heads = heads.n_kv_heads, head_dim = heads.head_dim, block_size = 16;
  const AttentionShape shape{n_heads, n_kv_heads, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim))};
  const int64_t blocks_per_seq = (n_ctx + block_size - 1) / block_size, n_blocks = blocks_per_seq * seqs;
  const int64_t slot_floats = n_kv_heads * head_dim, q_floats = n_heads * head_dim;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const RandomKvCache cache(n_blocks, block_size, n_kv_heads, head_dim, dtype, rng);
  const PagedKvView kv = cache.view();
  // Sequences' blocks scattered over the storage, as a cache that has served many requests leaves them.
  std::vector<int32_t> order(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; ++b) order[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<float> q(static_cast<size_t>(seqs * q_floats)), out(q.size());
  for (float& v : q) v = dist(rng);
  ThreadPool pool(split == HeadSplit::kSerial ? 1 : 2);
  std::vector<std::vector<float>> scratch(
      2, std::vector<float>(static_cast<size_t>(PagedAttentionScratchSize(shape, n_ctx))));
  const int heads_per_task = split == HeadSplit::kApart ? 1 : n_kv_heads;
  const int tasks_per_seq = n_kv_heads / heads_per_task;
  auto task = [&](int64_t t, int thread) {
    const int64_t s = t / tasks_per_seq;
    const int h0 = static_cast<int>(t % tasks_per_seq) * heads_per_task;
    const std::span<const int32_t> table(order.data() + s * blocks_per_seq, static_cast<size_t>(blocks_per_seq));
    PagedAttention(q.data() + s * q_floats, shape, kv, table, n_ctx, h0, h0 + heads_per_task,
                   scratch[static_cast<size_t>(thread)], out.data() + s * q_floats);
  };
  for (auto _ : state) {
    pool.ParallelFor(int64_t{seqs} * tasks_per_seq, task);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // Keys + values, with int8's one f32 scale per row.
  const double bytes_per_element =
      static_cast<double>(KvElementBytes(dtype)) + (dtype == KvDtype::kInt8 ? 4.0 / head_dim : 0.0);
  const double bytes = 2.0 * static_cast<double>(seqs * n_ctx * slot_floats) * bytes_per_element;
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  SetPagedAttentionLanes(0);
}

// A prefill chunk's attention: the `tokens` last tokens of one sequence of n_ctx positions (0.5B shape, blocks of 16
// in order), each token alone through PagedAttention (kAlone), in runs of kAttentionTokenBlock tokens through
// PagedAttentionTokens (kRuns: the same bits), or all of them through PromptAttention, one call per KV head (kPrompt:
// a prompt's bf16 rows on AMX-BF16 tiles, another formula). Counter: tokens/s per CPU second of the one thread.
// ctx:1000/tokens:8 is the few tokens a step computes after a long cached prefix, or a speculative step's check.
enum class PrefillMode { kAlone, kRuns, kPrompt };
void BM_PagedAttentionPrefill(benchmark::State& state, int lanes, int64_t n_ctx, int tokens, KvDtype dtype,
                              PrefillMode mode) {
  const int n_heads = 14, n_kv_heads = 2, head_dim = 64, block_size = 16;
  const AttentionShape shape{n_heads, n_kv_heads, head_dim, 0.125f};
  if (mode == PrefillMode::kPrompt ? !PromptAttentionCovers(shape) : !SetPagedAttentionLanes(lanes)) {
    state.SkipWithError("path not supported on this CPU");
    return;
  }
  const int64_t n_blocks = (n_ctx + block_size - 1) / block_size, q_floats = n_heads * head_dim;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const RandomKvCache cache(n_blocks, block_size, n_kv_heads, head_dim, dtype, rng);
  const PagedKvView kv = cache.view();
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; ++b) table[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  std::vector<float> q(static_cast<size_t>(tokens * q_floats)), out(q.size());
  for (float& v : q) v = dist(rng);
  const int64_t first = n_ctx - tokens + 1;  // the chunk's first token's context
  std::vector<float> scratch(static_cast<size_t>(
      std::max(PagedAttentionScratchSize(shape, n_ctx), PagedAttentionTokensScratchSize(shape, n_ctx, tokens))));
  std::vector<uint8_t> prompt_scratch(
      static_cast<size_t>(mode == PrefillMode::kPrompt ? PromptAttentionScratchBytes(shape, n_ctx) : 0));
  for (auto _ : state) {
    if (mode == PrefillMode::kPrompt) {
      for (int kvh = 0; kvh < n_kv_heads; ++kvh)
        PromptAttention(q.data(), q_floats, shape, kv, table, first, tokens, kvh, prompt_scratch, out.data(), q_floats);
    } else if (mode == PrefillMode::kRuns) {
      for (int i = 0; i < tokens; i += kAttentionTokenBlock)
        PagedAttentionTokens(q.data() + i * q_floats, q_floats, shape, kv, table, first + i,
                             std::min(kAttentionTokenBlock, tokens - i), 0, n_kv_heads, scratch,
                             out.data() + i * q_floats, q_floats);
    } else {
      for (int i = 0; i < tokens; ++i)
        PagedAttention(q.data() + i * q_floats, shape, kv, table, first + i, 0, n_kv_heads, scratch,
                       out.data() + i * q_floats);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  SetPagedAttentionLanes(0);
}

// A mixture-of-experts layer's products as a decode step runs them (MatMulGrouped): `experts` experts of
// qwen3-moe-mini's shape (gate and up 384 x 1024, down 1024 x 384; Q4_K with Q4_0 down as make-model writes it, or
// MLX 4-bit in groups of 64 with f16 scales and biases; repacked as at load by RepackAllForKernels), each over its
// group of `per_expert` tokens, over 4 layers' experts in turn so the weights stream from memory as in a model (4
// layers: ~170 MB packed).
// Counters: GOP/s and GB/s of packed weight bytes; per CPU second of the calling thread with one thread. 64
// sequences top-8 of 64 experts give ~8 tokens an expert; the dense shape's 64 tokens are MatMul/q4_k/.../tokens:64.
// `down`: the down products (the activations of width 384) instead of gate and up.
void BM_ExpertsGrouped(benchmark::State& state, WType type, bool down, int64_t per_expert, int threads) {
  constexpr int kExperts = 64, kLayers = 4;
  const Shape s = down ? Shape{"expert_down", 1024, 384} : Shape{"expert", 384, 1024};
  WType t = type;
  if (down && t.dtype == DType::kQ4_K) t = WType{"q4_0", DType::kQ4_0};  // K-quants need rows of 256 multiples
  auto w = MakeWeights(t, s);
  const int per_layer = down ? 1 : 2;
  std::vector<MatrixView> views(static_cast<size_t>(kExperts * kLayers * per_layer), w->view);
  // Every matrix its own packed copy (same values): distinct memory to stream, laid out as at model load.
  std::vector<MatrixView*> mats;
  for (MatrixView& v : views) mats.push_back(&v);
  size_t packed_bytes = 0;
  const auto owners = RepackAllForKernels(mats, nullptr, &packed_bytes);
  const int64_t rows = kExperts * per_expert;
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * s.cols)), g(static_cast<size_t>(rows * s.rows)), u(g.size());
  for (float& v : x) v = dist(rng);
  ThreadPool* pool = threads > 1 ? Pool(threads) : nullptr;
  std::vector<MatMulGroupOut> products;
  for (auto _ : state) {
    for (int l = 0; l < kLayers; ++l) {
      products.clear();
      for (int e = 0; e < kExperts; ++e) {
        const int64_t first = e * per_expert;
        const size_t i = static_cast<size_t>((l * kExperts + e) * per_layer);
        products.push_back({&views[i], first, per_expert, g.data() + first * s.rows, s.rows});
        if (!down) products.push_back({&views[i + 1], first, per_expert, u.data() + first * s.rows, s.rows});
      }
      MatMulGrouped(products, x.data(), rows, pool);
    }
    benchmark::DoNotOptimize(g.data());
    benchmark::ClobberMemory();
  }
  const double ops = 2.0 * per_layer * kLayers * static_cast<double>(s.rows * s.cols) * static_cast<double>(rows);
  state.counters["GOP/s"] = benchmark::Counter(ops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(packed_bytes) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_GatedMlp(benchmark::State& state, WType t, int64_t n, int threads, bool fused) {
  if (!IsIsaSupported(IsaPath::kAmx)) {
    state.SkipWithError("no AMX on this CPU");
    return;
  }
  ForceIsa(IsaPath::kAmx);
  constexpr int64_t H = 896, F = 4864;
  // Distinct names: three matrices alive at once, not one cached.
  const auto gate = MakeWeights(t, {"gate", F, H}), up = MakeWeights(t, {"up", F, H}), down = MakeWeights(t, {"down", H, F});
  MatrixView vg = gate->view, vu = up->view, vd = down->view;
  const auto og = RepackForKernels(&vg, nullptr), ou = RepackForKernels(&vu, nullptr), od = RepackForKernels(&vd, nullptr);
  if (!GatedMlpBf16Covers(vg, vu, vd)) {
    state.SkipWithError("no bf16 formula here for this type");
    return;
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * H)), g(static_cast<size_t>(n * F)), u(g.size()), y(x.size());
  for (float& v : x) v = dist(rng);
  ThreadPool* pool = threads > 1 ? Pool(threads) : nullptr;
  const RowRange all[] = {{0, n}};
  const MatMulOut gate_up[] = {{&vg, g.data(), F}, {&vu, u.data(), F}};
  for (auto _ : state) {
    if (fused) {
      GatedMlpBf16(vg, vu, vd, &SiluMul, x.data(), all, y.data(), H, pool);
    } else {
      MatMulMulti(gate_up, x.data(), n, pool, all);
      const int64_t parts = pool != nullptr ? pool->num_threads() : 1;
      auto act = [&](int64_t part, int) {
        auto [b, e] = SplitRange(n * F, parts, part);
        SiluMul(g.data() + b, u.data() + b, e - b, g.data() + b);
      };
      if (pool != nullptr) {
        pool->ParallelFor(parts, act);
      } else {
        act(0, 0);
      }
      MatMul(vd, g.data(), n, y.data(), H, pool, all);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double ops = 2.0 * 3.0 * static_cast<double>(F * H) * static_cast<double>(n);
  state.counters["GOP/s"] = benchmark::Counter(ops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void RegisterGatedMlp() {
  const WType types[] = {{"q8_0", DType::kQ8_0}, {"q4_0", DType::kQ4_0}, {"mlx4g64", DType::kBF16, true, {4, 64}}};
  for (const WType& t : types)
    for (bool fused : {true, false})
      for (int64_t n : {64, 512})
        for (int threads : {1, 2}) {
          const std::string name = "GatedMlp/" + t.name + (fused ? "/fused" : "/parts") + "/tokens:" +
                                   std::to_string(n) + "/threads:" + std::to_string(threads);
          auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_GatedMlp, t, n, threads, fused)
                        ->Unit(benchmark::kMillisecond);
          if (threads > 1) b->UseRealTime();
        }
}

void RegisterExperts() {
  const WType types[] = {{"q4_k", DType::kQ4_K}, {"mlx4g64", DType::kF16, true, {4, 64}}};
  for (const WType& t : types)
    for (bool down : {false, true})
      for (int64_t n : {1, 2, 4, 8, 12, 16, 64}) {
        for (int threads : {1, 2}) {
          const std::string name = "ExpertsGrouped/" + t.name + (down ? "/down" : "") + "/per_expert:" +
                                   std::to_string(n) + "/threads:" + std::to_string(threads);
          auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_ExpertsGrouped, t, down, n, threads)
                        ->Unit(benchmark::kMillisecond);
          if (threads > 1) b->UseRealTime();
        }
      }
}

void RegisterAttention() {
  const std::pair<int, const char*> widths[] = {{16, "avx512"}, {8, "avx2"}, {4, "baseline"}};
  const std::pair<int64_t, int> sizes[] = {{128, 1}, {512, 1}, {2048, 1}, {512, 64}, {256, 512}};
  for (auto [lanes, isa] : widths) {
    for (KvDtype dtype : kKvDtypes)
      for (const AttnHeads& heads : {kQwen05bHeads, kLlama3bHeads})
        for (auto [n_ctx, seqs] : sizes) {
          if (*heads.name != '\0' && n_ctx == 128) continue;  // the 3B shape: the long and the batched cases
          const std::string type = dtype == KvDtype::kF32 ? "" : "/" + std::string(KvDtypeName(dtype));
          const std::string shape = *heads.name == '\0' ? "" : "/" + std::string(heads.name);
          const std::string name = std::string("PagedAttention/") + isa + type + shape + "/ctx:" +
                                   std::to_string(n_ctx) + "/seqs:" + std::to_string(seqs);
          benchmark::RegisterBenchmark(name.c_str(), BM_PagedAttention, lanes, n_ctx, seqs, dtype, heads,
                                       HeadSplit::kSerial)
              ->Unit(benchmark::kMicrosecond);
        }
  }
  // The out-of-cache case in f16 over two threads, both splits of a step's decode tokens.
  for (const AttnHeads& heads : {kQwen05bHeads, kLlama3bHeads})
    for (auto [split, split_name] :
         {std::pair{HeadSplit::kApart, "apart"}, std::pair{HeadSplit::kTogether, "together"}}) {
      const std::string shape = *heads.name == '\0' ? "" : "/" + std::string(heads.name);
      const std::string name = "PagedAttention/avx512/f16" + shape + "/ctx:256/seqs:512/threads:2/heads:" + split_name;
      benchmark::RegisterBenchmark(name.c_str(), BM_PagedAttention, 16, 256, 512, KvDtype::kF16, heads, split)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
}

// PagedAttentionPrefill/<isa>[/f16|/bf16|/int8]/ctx:<n_ctx>/tokens:<n>/<alone|runs>, and
// PagedAttentionPrefill/bf16[/f16|/bf16|/int8]/ctx:<n_ctx>/tokens:<n>/prompt: see BM_PagedAttentionPrefill.
void RegisterPrefillAttention() {
  const std::pair<int, const char*> widths[] = {{16, "avx512"}, {8, "avx2"}, {4, "baseline"}, {0, "bf16"}};
  const std::pair<int64_t, int> sizes[] = {{1000, 8}, {512, 512}, {2048, 512}, {2048, 2048}};
  for (auto [lanes, isa] : widths)
    for (KvDtype dtype : kKvDtypes)
      for (auto [n_ctx, tokens] : sizes)
        for (PrefillMode mode : {PrefillMode::kAlone, PrefillMode::kRuns, PrefillMode::kPrompt}) {
          if ((lanes == 0) != (mode == PrefillMode::kPrompt)) continue;
          const std::string type = dtype == KvDtype::kF32 ? "" : "/" + std::string(KvDtypeName(dtype));
          const char* how = mode == PrefillMode::kAlone ? "/alone" : mode == PrefillMode::kRuns ? "/runs" : "/prompt";
          const std::string name = std::string("PagedAttentionPrefill/") + isa + type + "/ctx:" +
                                   std::to_string(n_ctx) + "/tokens:" + std::to_string(tokens) + how;
          benchmark::RegisterBenchmark(name.c_str(), BM_PagedAttentionPrefill, lanes, n_ctx, tokens, dtype, mode)
              ->Unit(benchmark::kMillisecond);
        }
}

void BM_QuantizeActs(benchmark::State& state, IsaPath isa, int64_t cols, int64_t n) {
  if (!IsIsaSupported(isa)) {
    state.SkipWithError("path not supported on this CPU");
    return;
  }
  void (*quantize)(const float*, int64_t, int64_t, int, mm::QuantizedActs*) = &mm::QuantizeActs;
#if defined(__x86_64__)
  if (isa == IsaPath::kAvx512) quantize = mm::Avx512Kernels()->quantize_acts;
  if (isa == IsaPath::kAvx2) quantize = mm::Avx2Kernels()->quantize_acts;
#endif
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (float& v : x) v = dist(rng);
  std::vector<uint8_t> buf(mm::ActsBytes(n, cols, 1));
  mm::QuantizedActs a = mm::CarveActs(buf.data(), n, cols, 1);
  for (auto _ : state) {
    quantize(x.data(), 0, n, 128, &a);
    benchmark::DoNotOptimize(a.q);
    benchmark::ClobberMemory();
  }
  state.counters["blocks/s"] =
      benchmark::Counter(static_cast<double>(n * cols / 32), benchmark::Counter::kIsIterationInvariantRate);
}

void RegisterQuantizeActs() {
  for (IsaPath isa : {IsaPath::kAvx512, IsaPath::kAvx2, IsaPath::kScalar})
    for (int64_t cols : {896, 4864}) {
      const std::string name = "QuantizeActs/" + std::string(IsaName(isa)) + "/cols:" + std::to_string(cols) +
                               "/tokens:64";
      benchmark::RegisterBenchmark(name.c_str(), BM_QuantizeActs, isa, cols, int64_t{64})
          ->Unit(benchmark::kMicrosecond);
    }
}

void Register() {
  RegisterAmxProbe();
  RegisterAttention();
  RegisterPrefillAttention();
  RegisterExperts();
  RegisterGatedMlp();
  RegisterQuantizeActs();
  const std::vector<WType> types = {
      {"q8_0", DType::kQ8_0},  {"q4_0", DType::kQ4_0},  {"q4_k", DType::kQ4_K},
      {"q6_k", DType::kQ6_K},  {"f32", DType::kF32},    {"f16", DType::kF16},
      {"bf16", DType::kBF16},  {"mlx4g64", DType::kBF16, true, {4, 64}}, {"mlx8g64", DType::kBF16, true, {8, 64}},
      {"mlx3g64", DType::kBF16, true, {3, 64}},
  };
  // "l2": a 512 x 1024 slice that stays in L2 across iterations: the compute ceiling without memory stalls.
  const std::vector<Shape> shapes = {{"up", 4864, 896},     {"down", 896, 4864},     {"head", 151936, 896},
                                     {"l2", 512, 1024},     {"up3b", 8192, 3072},    {"down3b", 3072, 8192}};
  // Grouped by type and shape so each weight matrix is built once.
  for (const WType& t : types) {
    for (const Shape& s : shapes) {
      if ((t.dtype == DType::kQ4_K || t.dtype == DType::kQ6_K) && !t.mlx && s.cols % 256 != 0) continue;
      for (IsaPath isa : {IsaPath::kAmx, IsaPath::kAvx512, IsaPath::kAvxVnni, IsaPath::kAvx2, IsaPath::kScalar}) {
        for (int64_t n : {1, 8, 32, 64, 512}) {
          for (int threads : {1, 2}) {
           for (bool packed : {false, true}) {
            // The scalar twin is a reference, not a contender: one small point for scale.
            if (isa == IsaPath::kScalar && (s.name != "up" || n > 8 || threads != 1)) continue;
            // Weights repacked at load, as RepackForKernels packs them for the path in use.
            if (packed && isa == IsaPath::kScalar) continue;
            std::string name = "MatMul/" + t.name + "/" + std::string(IsaName(isa)) + (packed ? "+packed" : "") + "/" +
                               s.name + "/tokens:" + std::to_string(n) + "/threads:" + std::to_string(threads);
            // amx-bf16+packed: the same weights through the bf16 formula (the rows of a prompt).
            const bool bf16_too = isa == IsaPath::kAmx && packed && t.dtype != DType::kQ6_K &&
                                  (t.mlx || !Info(t.dtype).is_float);
            for (bool bf16 : {false, true}) {
              if (bf16 && !bf16_too) continue;
              const std::string full = bf16 ? "MatMul/" + t.name + "/amx-bf16+packed/" + s.name + "/tokens:" +
                                                  std::to_string(n) + "/threads:" + std::to_string(threads)
                                            : name;
              auto* b = benchmark::RegisterBenchmark(full.c_str(), BM_MatMul, t, isa, s, n, threads, packed, bf16);
              b->Unit(benchmark::kMillisecond);
              // One thread: rates per CPU second of that thread (robust on a shared machine). Two threads:
              // rates per wall-clock second (the CPU column then shows the calling thread only).
              if (threads > 1) b->UseRealTime();
            }
           }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace parallm

int main(int argc, char** argv) {
  parallm::Register();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
