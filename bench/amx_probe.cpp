// AmxProbe/<case>: whether this CPU runs AMX tile instructions and AVX-512 arithmetic at the same time, measured on
// the two halves of the AMX kernel's (src/kernels/cpu/matmul_amx.cpp) work for one 32-column block of a 2 x 2 tile
// block (32 tokens x 32 rows), with every operand in L1:
//   tiles        the tile side: store the 4 products of the block before, load 2 token and 2 weight tiles, zero and
//                multiply into the 4 products;
//   tiles/k64    the same with 64 columns a multiply instead of 32 (twice the multiply-adds);
//   tails        the vector side: the f32 tail of 4 stored products (16 tokens x 16 rows each: convert, scale x
//                activation scale, fma, bias fma, through the accumulators in memory);
//   tiles+tails  both in one loop, as the kernel runs them;
//   interleaved  both, each product's store, zero, loads and multiply followed by that product's tail.
// Counter per_block: seconds per block (e.g. 61n). If the units overlapped, tiles+tails would read near the larger
// of the two alone; on the Sapphire Rapids kind it reads their sum (2026-12-03: 61 + 59 -> 124 ns, interleaved
// ~105), which is why the kernel's pipelining buys little there. tiles/k64 costs ~1.3x tiles for twice the
// multiply-adds (a multiply itself costs the same for 16, 32 or 64 columns; the loads grow): blocks of 32 columns,
// one scale each, leave about a third of the tile side's rate unused. Registered only where AMX is usable.
#include "amx_probe.h"

#include <benchmark/benchmark.h>

#include "kernels/cpu/amx_tile_config.h"
#include "kernels/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512bw,amx-tile,amx-int8")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // _mm512_set1_ps and friends in GCC 12's headers
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace parallm {
namespace {

// The operands of a block, each in L1: token rows ([16][1024] int8 twice, read 32 bytes a block), weight tiles (two
// slots of two 8 x 64-byte tiles), 4 slots of 4 stored products, the accumulators and per-block parameters.
struct alignas(64) ProbeData {
  int8_t tokens[2][16 * 1024];
  uint8_t weights[2][2][1024];  // 512 bytes used but by tiles/k64
  int32_t products[4][1024];
  float acc[1024];
  float scale[64][16], bias[64][16], d[64][16], ds[64][16];
};

inline __attribute__((always_inline)) void Tiles(ProbeData& p, int64_t b) {
  int32_t* c = p.products[b & 3];
  _tile_stored(0, c, 64);
  _tile_stored(1, c + 256, 64);
  _tile_stored(2, c + 512, 64);
  _tile_stored(3, c + 768, 64);
  _tile_loadd(4, p.tokens[0] + (b & 1) * 32, 1024);
  _tile_loadd(5, p.tokens[1] + (b & 1) * 32, 1024);
  _tile_loadd(6, p.weights[(b + 1) & 1][0], 64);
  _tile_loadd(7, p.weights[(b + 1) & 1][1], 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_dpbsud(0, 4, 6);
  _tile_dpbsud(1, 4, 7);
  _tile_dpbsud(2, 5, 6);
  _tile_dpbsud(3, 5, 7);
}

// The tail of product tile t of the block stored two steps before (as the kernel lags its tails).
inline __attribute__((always_inline)) void Tail(ProbeData& p, int64_t b, int t) {
  const int32_t* c = p.products[(b - 2) & 3] + 256 * t;
  const int j = static_cast<int>(b & 63);
  const __m512 scale = _mm512_load_ps(p.scale[j]), bias = _mm512_load_ps(p.bias[j]);
  float* acc = p.acc + 256 * t;
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    __m512 f = _mm512_load_ps(acc + 16 * i);
    f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * i)),
                        _mm512_mul_ps(scale, _mm512_set1_ps(p.d[j][i])), f);
    f = _mm512_fmadd_ps(bias, _mm512_set1_ps(p.ds[j][i]), f);
    _mm512_store_ps(acc + 16 * i, f);
  }
}

// Product t's share of the tile side, then its tail (the `interleaved` case).
inline __attribute__((always_inline)) void Interleaved(ProbeData& p, int64_t b) {
  int32_t* c = p.products[b & 3];
  _tile_stored(0, c, 64);
  _tile_zero(0);
  _tile_stored(1, c + 256, 64);
  _tile_zero(1);
  _tile_loadd(4, p.tokens[0] + (b & 1) * 32, 1024);
  _tile_loadd(6, p.weights[(b + 1) & 1][0], 64);
  _tile_dpbsud(0, 4, 6);
  Tail(p, b, 0);
  _tile_loadd(7, p.weights[(b + 1) & 1][1], 64);
  _tile_dpbsud(1, 4, 7);
  Tail(p, b, 1);
  _tile_stored(2, c + 512, 64);
  _tile_zero(2);
  _tile_stored(3, c + 768, 64);
  _tile_zero(3);
  _tile_loadd(5, p.tokens[1] + (b & 1) * 32, 1024);
  _tile_dpbsud(2, 5, 6);
  Tail(p, b, 2);
  _tile_dpbsud(3, 5, 7);
  Tail(p, b, 3);
}

enum class Case { kTiles, kTilesK64, kTails, kBoth, kInterleaved };

void BM_AmxProbe(benchmark::State& state, Case which) {
  static ProbeData p;  // ~100 KiB: not on the stack
  std::memset(&p, 1, sizeof(p));
  for (int j = 0; j < 64; ++j)
    for (int i = 0; i < 16; ++i) {
      p.scale[j][i] = 1.0f;
      p.bias[j][i] = 0.0f;
      p.d[j][i] = 1e-6f;
      p.ds[j][i] = 1e-6f;
    }
  amx::TileConfig config;
  for (int t = 0; t < 4; ++t) config.Set(t, 16, 64);  // products: 16 tokens x 16 int32
  for (int t = 4; t < 6; ++t) config.Set(t, 16, 32);  // tokens: 16 x 32 bytes
  for (int t = 6; t < 8; ++t) config.Set(t, 8, 64);   // weights: 8 x (16 rows x 4 bytes)
  if (which == Case::kTilesK64) {                     // 64 columns a multiply: twice the multiply-adds
    for (int t = 4; t < 6; ++t) config.Set(t, 16, 64);
    for (int t = 6; t < 8; ++t) config.Set(t, 16, 64);
  }
  amx::LoadTileConfig(config);
  constexpr int64_t kBlocks = 4096;
  for (auto _ : state) {
    for (int64_t b = 2; b < kBlocks + 2; ++b) {
      switch (which) {
        case Case::kTiles:
        case Case::kTilesK64:
          Tiles(p, b);
          break;
        case Case::kTails:
          for (int t = 0; t < 4; ++t) Tail(p, b, t);
          break;
        case Case::kBoth:
          Tiles(p, b);
          for (int t = 0; t < 4; ++t) Tail(p, b, t);
          break;
        case Case::kInterleaved:
          Interleaved(p, b);
          break;
      }
    }
    benchmark::DoNotOptimize(p.acc);
    benchmark::ClobberMemory();
  }
  _tile_release();
  // (iterations x blocks / seconds)^-1: seconds a block, printed with its SI prefix (e.g. 61n).
  state.counters["per_block"] = benchmark::Counter(
      static_cast<double>(kBlocks), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

}  // namespace

void RegisterAmxProbe() {
  if (!IsIsaSupported(IsaPath::kAmx)) return;  // also asks Linux for the tile state
  const std::pair<Case, const char*> cases[] = {
      {Case::kTiles, "tiles"},       {Case::kTilesK64, "tiles/k64"},      {Case::kTails, "tails"},
      {Case::kBoth, "tiles+tails"}, {Case::kInterleaved, "interleaved"}};
  for (auto [which, name] : cases)
    benchmark::RegisterBenchmark((std::string("AmxProbe/") + name).c_str(), BM_AmxProbe, which)
        ->Unit(benchmark::kMicrosecond);
}

}  // namespace parallm

#pragma GCC diagnostic pop
#pragma GCC pop_options

#else

namespace parallm {
void RegisterAmxProbe() {}
}  // namespace parallm

#endif
