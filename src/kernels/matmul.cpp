// MatMul dispatch: picks the kernel path (ActiveIsa), quantizes the activations once per call, and splits
// the weight rows over the thread pool in whole row groups (one group = one SIMD register of rows).
// Which thread runs which rows never changes a result: each output is computed by exactly one task with
// the same operations as any other split would use (see matmul_internal.h).
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/matmul_internal.h"
#include "kernels/ops.h"
#include "util/check.h"
#include "util/zeroed_pages.h"

namespace parallm {
namespace {

// A growable, 64-byte aligned per-thread buffer: MatMul runs ~170 times per decode step, so its scratch
// must not be allocated (and page-faulted) per call.
class Scratch {
 public:
  uint8_t* Get(size_t bytes) {
    if (bytes > cap_) {
      cap_ = std::max(bytes, cap_ * 2);
      mem_.reset(new uint8_t[cap_ + 64]);
    }
    auto p = reinterpret_cast<uintptr_t>(mem_.get());
    return reinterpret_cast<uint8_t*>((p + 63) & ~uintptr_t{63});
  }

 private:
  std::unique_ptr<uint8_t[]> mem_;
  size_t cap_ = 0;
};

thread_local Scratch t_acts;     // the calling thread's quantized activations
thread_local Scratch t_scratch;  // each thread's panel and accumulator space

const mm::IsaKernels* KernelsFor(IsaPath isa) {
  switch (isa) {
#if defined(__x86_64__)
    case IsaPath::kAmx:
      return mm::AmxKernels();
    case IsaPath::kAvx512:
      return mm::Avx512Kernels();
    case IsaPath::kAvxVnni:
      return mm::AvxVnniKernels();
    case IsaPath::kAvx2:
      return mm::Avx2Kernels();
#elif defined(__aarch64__)
    case IsaPath::kNeon:
      return mm::NeonKernels();
#endif
    default:
      return nullptr;  // kScalar: the reference twin
  }
}

// fn(task, thread) for every task < n, over the pool when there is one and more than one task.
void ParallelTasks(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int)>& fn) {
  if (pool && n > 1) {
    pool->ParallelFor(n, fn);
  } else {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
  }
}

// The path whose packed layout `isa` reads: AMX reads the AVX-512 panels.
IsaPath PackedLayout(IsaPath isa) { return isa == IsaPath::kAmx ? IsaPath::kAvx512 : isa; }

// The bf16 formula's kernel, where compiled in.
const mm::Bf16Kernels* Bf16KernelsHere() {
#if defined(__x86_64__)
  return mm::AmxBf16Kernels();
#else
  return nullptr;
#endif
}

constexpr int kBf16Unset = -1;
std::atomic<int> g_bf16_rows{kBf16Unset};  // SetBf16RowsEnabled's choice

bool Bf16RowsFromEnv() {
  const char* env = std::getenv("PARALLM_BF16_ROWS");
  return env == nullptr || std::string_view(env) != "0";
}

// Whether w is packed in the layout the bf16 kernel reads (the AVX-512 path's, which the AMX path reads too).
bool PackedForBf16(const MatrixView& w) {
  return w.packed != nullptr && w.packed_isa == static_cast<int8_t>(IsaPath::kAvx512);
}

// The rows `runs` (sorted, disjoint) of x in order, into `rows`, and as bf16 token tiles (the returned thread_local
// scratch): converted once, in stretches of consecutive rows, over the pool.
const uint16_t* ListedRowsAsTiles(const float* x, int64_t cols, std::span<const RowRange> runs, ThreadPool* pool,
                                  std::vector<int32_t>& rows) {
  const mm::Bf16Kernels* k = Bf16KernelsHere();
  const int threads = pool ? pool->num_threads() : 1;
  rows.clear();
  for (const RowRange& r : runs)
    for (int64_t t = r.begin; t < r.end; ++t) rows.push_back(static_cast<int32_t>(t));
  const int64_t n = static_cast<int64_t>(rows.size());
  thread_local Scratch t_bf16;
  auto* xb = reinterpret_cast<uint16_t*>(t_bf16.Get(static_cast<size_t>(mm::Bf16TilesElems(n, cols) * 2)));
  // A ragged last tile's padding rows: their sums are never stored, but they are read; zeros, not stale bits.
  if (n % 16 != 0)
    std::memset(xb + mm::Bf16TileOffset(n / 16 * 16, 0, cols), 0, static_cast<size_t>(16 * cols * 2));
  ParallelTasks(pool, threads, [&](int64_t task, int) {
    auto [i0, i1] = SplitRange(n, threads, task);
    for (int64_t i = i0; i < i1;) {  // rows i0.. in stretches of consecutive rows of x
      int64_t j = i + 1;
      while (j < i1 && rows[static_cast<size_t>(j)] == rows[static_cast<size_t>(j - 1)] + 1) ++j;
      k->to_bf16(x + rows[static_cast<size_t>(i)] * cols, cols, j - i, xb, i);
      i = j;
    }
  });
  return xb;
}

// Each product (covered, packed for the bf16 kernel) times the token tiles xb of `rows` (the rows of `runs`), each
// row's outputs at its own row of y. Tasks of whole pairs of row groups (a pair shares its token tiles' loads), about
// threads * 4 in all (CountTasks), the row groups of all products in one parallel loop.
void RunBf16Products(std::span<const MatMulOut> outs, const uint16_t* xb, std::span<const int32_t> rows,
                     std::span<const RowRange> runs, ThreadPool* pool) {
  const mm::Bf16Kernels* k = Bf16KernelsHere();
  const int64_t cols = outs[0].w->cols, n = static_cast<int64_t>(rows.size());
  const int threads = pool ? pool->num_threads() : 1;
  const bool one_run = runs.size() == 1;
  struct Task {
    mm::Bf16Args args;
    int64_t r0, r1;
  };
  thread_local std::vector<Task> t_tasks;
  std::vector<Task>& tasks = t_tasks;
  tasks.clear();
  thread_local std::vector<TaskCut> t_cuts;
  std::vector<TaskCut>& cuts = t_cuts;
  cuts.clear();
  for (const MatMulOut& o : outs) cuts.push_back(TaskCut{(o.w->rows + 31) / 32, (o.w->rows + 31) / 32});
  CountTasks(cuts, threads * 4, threads);
  for (size_t i = 0; i < outs.size(); ++i) {
    const MatMulOut& o = outs[i];
    mm::QFormat fmt;
    PARALLM_CHECK(Bf16FormulaCovers(*o.w) && PackedForBf16(*o.w) && mm::QuantFormatOf(*o.w, &fmt) && o.w->cols == cols);
    const mm::Bf16Args args{o.w,        fmt,         xb, n, one_run ? o.y + runs[0].begin * o.y_stride : o.y,
                            o.y_stride, one_run ? nullptr : rows.data()};
    for (int64_t t = 0; t < cuts[i].n; ++t) {
      const auto [p0, p1] = SplitRange(cuts[i].units, cuts[i].n, t);
      tasks.push_back(Task{args, p0 * 32, std::min(o.w->rows, p1 * 32)});
    }
  }
  const size_t scratch_bytes = k->scratch_bytes(cols);
  ParallelTasks(pool, static_cast<int64_t>(tasks.size()), [&](int64_t t, int) {
    const Task& task = tasks[static_cast<size_t>(t)];
    k->rows(task.args, task.r0, task.r1, t_scratch.Get(scratch_bytes));
  });
}

// The bf16 formula for the rows `runs` (sorted, disjoint) of x in every product, all of them covered and packed for it:
// the rows are converted to bf16 once, one after another, and each product runs over them as one batch (its weights
// dequantized once for all the runs, not once a run).
void MatMulBf16Grouped(std::span<const MatMulOut> outs, const float* x, std::span<const RowRange> runs,
                       ThreadPool* pool) {
  thread_local std::vector<int32_t> t_rows;
  const uint16_t* xb = ListedRowsAsTiles(x, outs[0].w->cols, runs, pool, t_rows);
  if (!t_rows.empty()) RunBf16Products(outs, xb, t_rows, runs, pool);
}

}  // namespace

bool Bf16PromptsWanted() {
  const int set = g_bf16_rows.load(std::memory_order_relaxed);
  static const bool from_env = Bf16RowsFromEnv();
  return set == kBf16Unset ? from_env : set != 0;
}

bool Bf16RowsEnabled() {
  return Bf16PromptsWanted() && ActiveIsa() == IsaPath::kAmx && HasAmxBf16() && Bf16KernelsHere() != nullptr;
}

void SetBf16RowsEnabled(bool on) { g_bf16_rows.store(on ? 1 : 0, std::memory_order_relaxed); }

bool Bf16FormulaCovers(const MatrixView& w) {
  mm::QFormat fmt;
  return w.rows > 0 && mm::QuantFormatOf(w, &fmt) && mm::Bf16FormulaCovers(fmt);
}

void MatMul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride, ThreadPool* pool,
            std::span<const RowRange> bf16_rows) {
  const MatMulOut out{&w, y, y_stride};
  MatMulMulti(std::span<const MatMulOut>(&out, 1), x, n_tokens, pool, bf16_rows);
}

namespace {

// MatMulMulti with bf16_rows; with `bf16_part` false, the listed rows of the products the bf16 formula covers are left
// alone (MatMulMultiExcept).
void MatMulMultiParts(std::span<const MatMulOut> outs, const float* x, int64_t n_tokens, ThreadPool* pool,
                      std::span<const RowRange> bf16_rows, bool bf16_part) {
  if (bf16_rows.empty() || !Bf16RowsEnabled()) return MatMulMulti(outs, x, n_tokens, pool);
  // The int8 formula: every row of the products bf16 does not cover, the other rows of those it does.
  thread_local std::vector<MatMulGroupOut> t_int8;
  thread_local std::vector<MatMulOut> t_bf16;
  std::vector<MatMulGroupOut>& int8 = t_int8;
  std::vector<MatMulOut>& bf16 = t_bf16;
  int8.clear();
  bf16.clear();
  // A covered matrix not repacked at load (PARALLM_REPACK=0, tests forcing another path) is packed for this call, so
  // the rows a caller lists get the same formula either way.
  thread_local std::vector<MatrixView> t_views;
  thread_local std::vector<std::shared_ptr<uint8_t[]>> t_copies;
  std::vector<MatrixView>& views = t_views;
  views.clear();
  views.reserve(outs.size());
  t_copies.clear();
  for (const MatMulOut& o : outs) {
    auto int8_part = [&](int64_t b, int64_t e) {
      if (e > b) int8.push_back(MatMulGroupOut{o.w, b, e - b, o.y + b * o.y_stride, o.y_stride});
    };
    const MatrixView* w = o.w;
    if (Bf16FormulaCovers(*w) && !PackedForBf16(*w)) {
      views.push_back(*w);
      if (auto copy = RepackForKernels(&views.back(), nullptr)) {
        t_copies.push_back(std::move(copy));
        w = &views.back();
      }
    }
    if (!Bf16FormulaCovers(*w) || !PackedForBf16(*w)) {
      int8_part(0, n_tokens);
      continue;
    }
    bf16.push_back(MatMulOut{w, o.y, o.y_stride});
    int64_t next = 0;
    for (const RowRange& r : bf16_rows) {
      PARALLM_CHECK(r.begin >= next && r.end >= r.begin && r.end <= n_tokens);
      int8_part(next, r.begin);
      next = r.end;
    }
    int8_part(next, n_tokens);
  }
  if (!int8.empty()) {
    // Only the rows the int8 parts read are quantized (a prompt's step: its last token, not all of them).
    int64_t lo = n_tokens, hi = 0;
    for (const MatMulGroupOut& o : int8) lo = std::min(lo, o.x_begin), hi = std::max(hi, o.x_begin + o.n_tokens);
    for (MatMulGroupOut& o : int8) o.x_begin -= lo;
    MatMulGrouped(int8, x + lo * outs[0].w->cols, hi - lo, pool);
  }
  if (!bf16.empty() && bf16_part) MatMulBf16Grouped(bf16, x, bf16_rows, pool);
}

}  // namespace

void MatMulMulti(std::span<const MatMulOut> outs, const float* x, int64_t n_tokens, ThreadPool* pool,
                 std::span<const RowRange> bf16_rows) {
  MatMulMultiParts(outs, x, n_tokens, pool, bf16_rows, true);
}

void MatMulMultiExcept(std::span<const MatMulOut> outs, const float* x, int64_t n_tokens, ThreadPool* pool,
                       std::span<const RowRange> bf16_rows) {
  MatMulMultiParts(outs, x, n_tokens, pool, bf16_rows, false);
}

bool GatedMlpBf16Covers(const MatrixView& gate, const MatrixView& up, const MatrixView& down) {
  const mm::Bf16Kernels* k = Bf16KernelsHere();
  mm::QFormat fg, fu;
  return Bf16RowsEnabled() && k != nullptr && Bf16FormulaCovers(gate) && Bf16FormulaCovers(up) &&
         Bf16FormulaCovers(down) && PackedForBf16(gate) && PackedForBf16(up) && PackedForBf16(down) &&
         gate.rows == up.rows && gate.cols == up.cols && down.cols == gate.rows && mm::QuantFormatOf(gate, &fg) &&
         mm::QuantFormatOf(up, &fu) && k->gated_pair_ok(gate, up, fg, fu);
}

void GatedMlpBf16(const MatrixView& gate, const MatrixView& up, const MatrixView& down, ActMulFn act, const float* x,
                  std::span<const RowRange> rows, float* y, int64_t y_stride, ThreadPool* pool) {
  PARALLM_CHECK(GatedMlpBf16Covers(gate, up, down));
  const mm::Bf16Kernels* k = Bf16KernelsHere();
  thread_local std::vector<int32_t> t_rows;
  const uint16_t* xb = ListedRowsAsTiles(x, gate.cols, rows, pool, t_rows);
  const int64_t n = static_cast<int64_t>(t_rows.size());
  if (n == 0) return;
  // act(gate x) * (up x) for the rows, as token tiles of bf16 (down's input), over tasks of row groups of gate and up.
  thread_local Scratch t_h;
  auto* h = reinterpret_cast<uint16_t*>(t_h.Get(static_cast<size_t>(mm::Bf16TilesElems(n, gate.rows) * 2)));
  mm::QFormat fmt;
  PARALLM_CHECK(mm::QuantFormatOf(gate, &fmt));
  const mm::GatedBf16Args args{&gate, &up, fmt, xb, n, act, h};
  const int threads = pool ? pool->num_threads() : 1;
  const int64_t groups = gate.rows / 16;
  TaskCut cut{groups, groups};
  CountTasks(std::span<TaskCut>(&cut, 1), threads * 4, threads);
  const size_t scratch_bytes = k->scratch_bytes(gate.cols);
  ParallelTasks(pool, cut.n, [&](int64_t t, int) {
    const auto [g0, g1] = SplitRange(groups, cut.n, t);
    k->gated_rows(args, g0, g1, t_scratch.Get(scratch_bytes));
  });
  const MatMulOut out{&down, y, y_stride};
  RunBf16Products(std::span<const MatMulOut>(&out, 1), h, t_rows, rows, pool);
}

void MatMul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride, ThreadPool* pool) {
  const MatMulOut out{&w, y, y_stride};
  MatMulMulti(std::span<const MatMulOut>(&out, 1), x, n_tokens, pool);
}

void MatMulMulti(std::span<const MatMulOut> outs, const float* x, int64_t n_tokens, ThreadPool* pool) {
  thread_local std::vector<MatMulGroupOut> grouped;
  grouped.clear();
  for (const MatMulOut& o : outs) grouped.push_back(MatMulGroupOut{o.w, 0, n_tokens, o.y, o.y_stride});
  MatMulGrouped(grouped, x, n_tokens, pool);
}

void MatMulGrouped(std::span<const MatMulGroupOut> outs, const float* x, int64_t x_rows, ThreadPool* pool) {
  MatMulGroupedGather(outs, x, x_rows, nullptr, x_rows, pool);
}

namespace {

thread_local Scratch t_chunk;  // MatMulArgMax, MatMulGated: a task's chunk of outputs

// Rows a chunk should hold so that `products` chunks of n_tokens outputs fill about `bytes`: a multiple of two row
// groups, so a chunk keeps the kernel's pairs of groups.
int64_t ChunkRows(const mm::IsaKernels& k, int64_t n_tokens, int products, int64_t bytes) {
  const int64_t pair = 2 * k.row_group;
  return std::max<int64_t>(1, bytes / (4 * n_tokens * products) / pair) * pair;
}

// MatMulArgMax's reduction, carried through GroupedGather's tasks: each task multiplies its rows a chunk at a time into
// its thread's buffer (small enough to stay in L2) and scans each token's part there; the tasks' winners then merge
// in row order.
struct ArgMaxRows {
  float softcap = 0;
  int64_t chunk_rows = 0;     // ChunkRows
  std::vector<float> best;    // [task][token]: the task's largest output (a first chunk starts from row 0's)
  std::vector<int64_t> at;    // [task][token]: its row, or -1 while the task has taken none
};

// MatMulGated's epilogue, carried through GroupedGather's tasks (outs = {gate, up}): each task runs a chunk of gate's
// rows and the same rows of up into its thread's buffer, and writes act(gate) * up of those rows to gate's y.
struct GatedChunks {
  ActMulFn act = nullptr;
  int64_t chunk_rows = 0;  // ChunkRows
};

// MatMulGroupedGather; with `argmax` (one product, no gather, a quantized matrix on a kernel path) its reduction; with
// `gated` (gate and up, no gather, quantized, on a kernel path) act(gate) * up.
void GroupedGather(std::span<const MatMulGroupOut> outs, const float* x, int64_t x_rows, const int32_t* gather,
                   int64_t n_rows, ThreadPool* pool, ArgMaxRows* argmax, const GatedChunks* gated = nullptr);

// Which quantized path runs w on kernels `k` (null: the scalar twin or float weights; MatMulArgMax and MatMulGated
// then compute every output and finish them the plain way).
bool RunsQuantized(const mm::IsaKernels* k, const MatrixView& w) {
  mm::QFormat fmt;
  return k != nullptr && mm::QuantFormatOf(w, &fmt);
}

}  // namespace

void MatMulGroupedGather(std::span<const MatMulGroupOut> outs, const float* x, int64_t x_rows, const int32_t* gather,
                         int64_t n_rows, ThreadPool* pool) {
  GroupedGather(outs, x, x_rows, gather, n_rows, pool, nullptr);
}

void MatMulArgMax(const MatrixView& w, const float* x, int64_t n_tokens, float softcap, int32_t* argmax,
                  ThreadPool* pool) {
  if (n_tokens <= 0 || w.rows <= 0) return;
  const mm::IsaKernels* k = KernelsFor(ActiveIsa());
  if (!RunsQuantized(k, w)) {
    // Paths without the int8 kernels (the scalar twin, float weights): every output, then the scan.
    thread_local std::vector<float> t_y;
    std::vector<float>& y = t_y;
    y.resize(static_cast<size_t>(n_tokens * w.rows));
    MatMul(w, x, n_tokens, y.data(), w.rows, pool);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const std::span<float> row(y.data() + t * w.rows, static_cast<size_t>(w.rows));
      if (softcap > 0) SoftCap(row.data(), w.rows, softcap);
      argmax[t] = ArgMax(row);
    }
    return;
  }
  ArgMaxRows r;
  r.softcap = softcap;
  r.chunk_rows = ChunkRows(*k, n_tokens, 1, int64_t{256} << 10);
  const MatMulGroupOut out{&w, 0, n_tokens, nullptr, w.rows};
  GroupedGather(std::span<const MatMulGroupOut>(&out, 1), x, n_tokens, nullptr, n_tokens, pool, &r);
  const size_t n_tasks = r.best.size() / static_cast<size_t>(n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) {
    float best = r.best[static_cast<size_t>(t)];  // task 0: rows from 0, as the plain scan starts
    int64_t at = r.at[static_cast<size_t>(t)];
    for (size_t task = 1; task < n_tasks; ++task) {
      const size_t i = task * static_cast<size_t>(n_tokens) + static_cast<size_t>(t);
      if (r.best[i] > best) {  // strictly: ties stay with the lower rows, and a NaN row 0 is never replaced
        best = r.best[i];
        at = r.at[i];
      }
    }
    argmax[t] = static_cast<int32_t>(at);
  }
}

void MatMulGated(const MatrixView& gate, const MatrixView& up, ActMulFn act, const float* x, int64_t n_tokens, float* y,
                 int64_t y_stride, ThreadPool* pool) {
  PARALLM_CHECK(gate.rows == up.rows && gate.cols == up.cols && y_stride >= gate.rows);
  if (n_tokens <= 0 || gate.rows <= 0) return;
  const mm::IsaKernels* k = KernelsFor(ActiveIsa());
  if (!RunsQuantized(k, gate) || !RunsQuantized(k, up)) {
    // Paths without the int8 kernels: both products whole, then the activation.
    thread_local std::vector<float> t_up;
    std::vector<float>& u = t_up;
    u.resize(static_cast<size_t>(n_tokens * up.rows));
    const MatMulOut outs[] = {{&gate, y, y_stride}, {&up, u.data(), up.rows}};
    MatMulMulti(outs, x, n_tokens, pool);
    for (int64_t t = 0; t < n_tokens; ++t) act(y + t * y_stride, u.data() + t * up.rows, gate.rows, y + t * y_stride);
    return;
  }
  const GatedChunks g{act, ChunkRows(*k, n_tokens, 2, int64_t{256} << 10)};
  const MatMulGroupOut outs[] = {{&gate, 0, n_tokens, y, y_stride}, {&up, 0, n_tokens, nullptr, up.rows}};
  GroupedGather(outs, x, n_tokens, nullptr, n_tokens, pool, nullptr, &g);
}

namespace {

// The kernels' arguments for rows [c0, c0 + chunk) of `a` written to a chunk buffer: the kernels write row r of token t
// at y[t * y_stride + r], so those rows land at buf[t * chunk + r - c0].
mm::QuantArgs IntoChunk(mm::QuantArgs a, float* buf, int64_t c0, int64_t chunk) {
  a.y = reinterpret_cast<float*>(reinterpret_cast<uintptr_t>(buf) - static_cast<uintptr_t>(c0) * sizeof(float));
  a.y_stride = chunk;
  return a;
}

void GroupedGather(std::span<const MatMulGroupOut> outs, const float* x, int64_t x_rows, const int32_t* gather,
                   int64_t n_rows, ThreadPool* pool, ArgMaxRows* argmax, const GatedChunks* gated) {
  if (outs.empty() || n_rows <= 0) return;
  const int64_t cols = outs[0].w->cols;
  for (const MatMulGroupOut& o : outs)
    PARALLM_CHECK(o.y_stride >= o.w->rows && o.w->cols == cols && o.x_begin >= 0 && o.n_tokens >= 0 &&
                  o.x_begin + o.n_tokens <= n_rows);
  if (gated != nullptr)
    PARALLM_CHECK(outs.size() == 2 && gather == nullptr && outs[0].w->rows == outs[1].w->rows &&
                  outs[0].x_begin == outs[1].x_begin && outs[0].n_tokens == outs[1].n_tokens);
  const IsaPath isa = ActiveIsa();
  const mm::IsaKernels* k = KernelsFor(isa);
  if (gather != nullptr) {
    for (int64_t i = 0; i < n_rows; ++i) PARALLM_CHECK(gather[i] >= 0 && gather[i] < x_rows);
    // Paths that read f32 rows (the scalar twin, float weights): the gathered rows copied out, as the caller would.
    bool f32_rows = k == nullptr;
    for (const MatMulGroupOut& o : outs) {
      mm::QFormat fmt;
      f32_rows = f32_rows || (o.n_tokens > 0 && !mm::QuantFormatOf(*o.w, &fmt));
    }
    if (f32_rows) {
      thread_local std::vector<float> t_rows;
      std::vector<float>& rows = t_rows;
      rows.resize(static_cast<size_t>(n_rows * cols));
      for (int64_t i = 0; i < n_rows; ++i) std::copy_n(x + gather[i] * cols, cols, rows.data() + i * cols);
      MatMulGroupedGather(outs, rows.data(), n_rows, nullptr, n_rows, pool);
      return;
    }
  }
  if (k == nullptr) {
    for (const MatMulGroupOut& o : outs)
      if (o.n_tokens > 0) ref::MatMul(*o.w, x + o.x_begin * cols, o.n_tokens, o.y, o.y_stride, pool);
    return;
  }
  const int threads = pool ? pool->num_threads() : 1;
  const int64_t rg = k->row_group;

  // Per product: its weight format, and which activation format (code offset, sub-blocks) it reads.
  const size_t n_outs = outs.size();
  // Per-call state in the calling thread's storage, reached through references: inside the parallel lambdas a
  // thread_local name would be the worker's own (empty) copy.
  struct State {
    std::vector<mm::QFormat> fmts;
    std::vector<char> quant, packed;
    std::vector<int> act_of;
    std::vector<mm::QuantizedActs> slices;
    std::vector<mm::QuantArgs> qargs;
    std::vector<mm::FloatArgs> fargs;
  };
  thread_local State t_state;
  State& st = t_state;
  auto& fmts = st.fmts;
  auto& quant = st.quant;
  auto& packed = st.packed;
  auto& act_of = st.act_of;
  auto& slices = st.slices;
  auto& qargs = st.qargs;
  auto& fargs = st.fargs;
  fmts.assign(n_outs, mm::QFormat::kQ8_0);
  quant.assign(n_outs, 0);
  packed.assign(n_outs, 0);
  act_of.assign(n_outs, -1);
  constexpr int kMaxActs = 8;
  int n_acts = 0;
  int act_offset[kMaxActs], act_subs[kMaxActs];
  for (size_t i = 0; i < n_outs; ++i) {
    quant[i] = mm::QuantFormatOf(*outs[i].w, &fmts[i]);
    if (!quant[i] || outs[i].w->rows <= 0 || outs[i].n_tokens <= 0) continue;
    const int offset = k->code_offset(*outs[i].w, fmts[i]), subs = mm::SubBlocks(fmts[i]);
    int a = 0;
    while (a < n_acts && (act_offset[a] != offset || act_subs[a] != subs)) ++a;
    if (a == n_acts) {
      PARALLM_CHECK(n_acts < kMaxActs);
      act_offset[a] = offset;
      act_subs[a] = subs;
      ++n_acts;
    }
    act_of[i] = a;
  }

  // Every row of x quantized once per activation format; a product reads its rows' slice. Gathered: x's rows
  // quantized once each (src), then copied in the gathered order (a row's quantized values do not depend on where
  // it is copied, so the products see the same values as over gathered f32 rows).
  mm::QuantizedActs acts[kMaxActs], src[kMaxActs];
  if (n_acts > 0) {
    size_t act_bytes[kMaxActs], src_bytes[kMaxActs], total = 0;
    for (int a = 0; a < n_acts; ++a) {
      total += act_bytes[a] = mm::ActsBytes(n_rows, cols, act_subs[a]);
      total += src_bytes[a] = gather != nullptr ? mm::ActsBytes(x_rows, cols, act_subs[a]) : 0;
    }
    uint8_t* buf = t_acts.Get(total);
    for (int a = 0; a < n_acts; ++a) {
      acts[a] = mm::CarveActs(buf, n_rows, cols, act_subs[a]);
      buf += act_bytes[a];
      src[a] = gather != nullptr ? mm::CarveActs(buf, x_rows, cols, act_subs[a]) : acts[a];
      buf += src_bytes[a];
    }
    // Quantizing is ~1% of the multiply's work; split it over the pool only when there are many tokens.
    const int64_t qtasks = x_rows >= 16 ? std::min<int64_t>(x_rows / 8, threads * 2) : 1;
    ParallelTasks(pool, qtasks * n_acts, [&](int64_t task, int) {
      const int a = static_cast<int>(task / qtasks);
      auto [t0, t1] = SplitRange(x_rows, qtasks, task % qtasks);
      k->quantize_acts(x, t0, t1, act_offset[a], &src[a]);
    });
    if (gather != nullptr) {
      const int64_t ctasks = n_rows >= 64 ? std::min<int64_t>(n_rows / 32, threads * 2) : 1;
      ParallelTasks(pool, ctasks * n_acts, [&](int64_t task, int) {
        const int64_t a = task / ctasks;
        auto [i0, i1] = SplitRange(n_rows, ctasks, task % ctasks);
        for (int64_t i = i0; i < i1; ++i) mm::CopyActsRow(src[a], gather[i], &acts[a], i);
      });
    }
  }
  slices.resize(n_outs);
  qargs.resize(n_outs);
  fargs.resize(n_outs);
  int64_t max_tokens = 0;
  for (size_t i = 0; i < n_outs; ++i) {
    const MatMulGroupOut& o = outs[i];
    max_tokens = std::max(max_tokens, o.n_tokens);
    if (!quant[i]) {
      fargs[i] = mm::FloatArgs{o.w, x + o.x_begin * cols, o.n_tokens, o.y, o.y_stride};
      continue;
    }
    if (act_of[i] < 0) continue;
    const mm::QuantizedActs& all = acts[act_of[i]];
    mm::QuantizedActs& s = slices[i];
    s = all;
    s.n_tokens = o.n_tokens;
    s.q = all.q + o.x_begin * cols;
    s.d = all.d + o.x_begin * all.nb;
    s.ds = all.ds + o.x_begin * all.nb;
    s.corr = all.corr + o.x_begin * all.nb * all.subs;
    qargs[i] = mm::QuantArgs{o.w, fmts[i], &slices[i], o.y, o.y_stride};
    packed[i] = o.w->packed != nullptr && o.w->packed_isa == static_cast<int8_t>(PackedLayout(isa)) &&
                k->quant_rows_packed != nullptr;
  }

  // Row-group tasks over all the products, about threads * 8 in all (CountTasks: weighted by tokens, so an expert with
  // many tokens is cut finer; whole pairs of groups where the kernel tiles pairs), claimed dynamically. Gated: the
  // tasks are gate's, each running up's same rows too.
  struct Task {
    int out;
    int64_t r0, r1;
  };
  thread_local std::vector<Task> task_list;
  thread_local std::vector<TaskCut> cut_list;
  thread_local std::vector<int64_t> unit_list;  // row groups per unit: 2 where the kernel tiles pairs
  task_list.clear();
  const size_t n_tasked = gated != nullptr ? 1 : n_outs;
  cut_list.assign(n_tasked, TaskCut{});
  unit_list.assign(n_tasked, 1);
  for (size_t i = 0; i < n_tasked; ++i) {
    const MatMulGroupOut& o = outs[i];
    if (o.w->rows <= 0 || o.n_tokens <= 0) continue;
    const int64_t groups = (o.w->rows + rg - 1) / rg;
    if (packed[i] && k->pair_tokens > 0 && o.n_tokens >= k->pair_tokens) unit_list[i] = 2;
    cut_list[i] = TaskCut{(groups + unit_list[i] - 1) / unit_list[i], groups * o.n_tokens};
  }
  CountTasks(cut_list, threads <= 1 ? 1 : threads * 8, threads);
  for (size_t i = 0; i < n_tasked; ++i) {
    const int64_t unit_rows = unit_list[i] * rg;
    for (int64_t t = 0; t < cut_list[i].n; ++t) {
      const auto [u0, u1] = SplitRange(cut_list[i].units, cut_list[i].n, t);
      task_list.push_back(Task{static_cast<int>(i), u0 * unit_rows, std::min(outs[i].w->rows, u1 * unit_rows)});
    }
  }
  const std::vector<Task>& tl = task_list;
  const size_t scratch_bytes = k->scratch_bytes(max_tokens, cols);
  if (argmax != nullptr) {
    PARALLM_CHECK(n_outs == 1 && gather == nullptr && quant[0] && act_of[0] >= 0);
    argmax->best.assign(tl.size() * static_cast<size_t>(max_tokens), -INFINITY);
    argmax->at.assign(argmax->best.size(), -1);
  }
  if (gated != nullptr) PARALLM_CHECK(quant[0] && quant[1] && act_of[0] >= 0 && act_of[1] >= 0);
  auto rows_of = [&](size_t i) { return packed[i] ? k->quant_rows_packed : k->quant_rows; };
  ParallelTasks(pool, static_cast<int64_t>(tl.size()), [&](int64_t t, int) {
    const Task& task = tl[static_cast<size_t>(t)];
    const size_t i = static_cast<size_t>(task.out);
    if (!quant[i]) {
      k->float_rows(fargs[i], task.r0, task.r1);
      return;
    }
    auto rows = rows_of(i);
    uint8_t* scratch = t_scratch.Get(scratch_bytes);
    if (argmax == nullptr && gated == nullptr) {
      rows(qargs[i], task.r0, task.r1, scratch);
      return;
    }
    const int64_t nt = outs[i].n_tokens;
    if (gated != nullptr) {
      const int64_t chunk = gated->chunk_rows;
      float* g = reinterpret_cast<float*>(t_chunk.Get(static_cast<size_t>(2 * nt * chunk) * sizeof(float)));
      float* u = g + nt * chunk;
      for (int64_t c0 = task.r0; c0 < task.r1; c0 += chunk) {
        const int64_t c1 = std::min(task.r1, c0 + chunk);
        rows(IntoChunk(qargs[0], g, c0, chunk), c0, c1, scratch);
        rows_of(1)(IntoChunk(qargs[1], u, c0, chunk), c0, c1, scratch);
        for (int64_t tok = 0; tok < nt; ++tok)
          gated->act(g + tok * chunk, u + tok * chunk, c1 - c0, outs[0].y + tok * outs[0].y_stride + c0);
      }
      return;
    }
    const int64_t chunk = argmax->chunk_rows;
    float* buf = reinterpret_cast<float*>(t_chunk.Get(static_cast<size_t>(nt * chunk) * sizeof(float)));
    float* best = argmax->best.data() + t * nt;
    int64_t* at = argmax->at.data() + t * nt;
    for (int64_t c0 = task.r0; c0 < task.r1; c0 += chunk) {
      const int64_t c1 = std::min(task.r1, c0 + chunk);
      rows(IntoChunk(qargs[i], buf, c0, chunk), c0, c1, scratch);
      for (int64_t tok = 0; tok < nt; ++tok) {
        float* row = buf + tok * chunk;
        if (argmax->softcap > 0) SoftCap(row, c1 - c0, argmax->softcap);
        if (c0 == 0) {  // the plain scan starts at row 0's value
          best[tok] = row[0];
          at[tok] = 0;
        }
        ScanMax(row, c1 - c0, c0, &best[tok], &at[tok]);
      }
    }
  });
}

// Copies of at least this many bytes get a mapping of their own (2 MiB-aligned, huge pages); smaller ones share one.
constexpr size_t kHuge = size_t{2} << 20;
constexpr size_t kOwnMapping = kHuge / 2;

// The active path's packer for w, and the bytes of w's packed copy (0: that path does not repack w).
const mm::IsaKernels* Packer(const MatrixView& w, mm::QFormat* fmt, size_t* n) {
  *n = 0;
  const mm::IsaKernels* k = KernelsFor(ActiveIsa());
  if (k == nullptr || k->pack == nullptr || !mm::QuantFormatOf(w, fmt) || w.rows <= 0) return nullptr;
  *n = k->packed_bytes(w, *fmt);
  return *n > 0 ? k : nullptr;
}

// Packs w into p (64-byte aligned, the packed size long) and points w at it.
void PackInto(const mm::IsaKernels* k, mm::QFormat fmt, MatrixView* w, uint8_t* p) {
  k->pack(*w, fmt, p);
  w->packed = p;
  w->packed_isa = static_cast<int8_t>(PackedLayout(ActiveIsa()));
}

// Packs w (packer k, format fmt, n bytes) into memory of its own; *bytes receives that memory's size.
std::shared_ptr<uint8_t[]> PackOwned(const mm::IsaKernels* k, mm::QFormat fmt, size_t n, MatrixView* w,
                                    size_t* bytes) {
  // Large copies go on 2 MiB-aligned memory advised as transparent huge pages: a decode step streams every
  // weight once, and 4 KiB pages would cost a TLB walk per 64 cache lines (and ~130K page faults at load).
  std::shared_ptr<uint8_t[]> mem;
  size_t alloc = n + 64;
  uint8_t* p = nullptr;
  if (n >= kOwnMapping) {
    // Mapped pages, 2 MiB-aligned and advised as huge pages (util/zeroed_pages.h says why not malloc's heap).
    auto pages = std::make_shared<ZeroedPages>(n);
    p = static_cast<uint8_t*>(pages->get());
    alloc = pages->size();  // the last partial 2 MiB stays in small pages, untouched ones unmapped
    mem = std::shared_ptr<uint8_t[]>(pages, p);
  } else {
    mem = std::shared_ptr<uint8_t[]>(new uint8_t[alloc]);
    p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(mem.get()) + 63) & ~uintptr_t{63});
  }
  PackInto(k, fmt, w, p);
  if (bytes) *bytes = alloc;
  return mem;
}

}  // namespace

std::shared_ptr<uint8_t[]> RepackForKernels(MatrixView* w, size_t* bytes) {
  if (bytes) *bytes = 0;
  mm::QFormat fmt;
  size_t n = 0;
  const mm::IsaKernels* k = Packer(*w, &fmt, &n);
  return k == nullptr ? nullptr : PackOwned(k, fmt, n, w, bytes);
}

std::vector<std::shared_ptr<uint8_t[]>> RepackAllForKernels(std::span<MatrixView* const> mats, ThreadPool* pool,
                                                            size_t* bytes,
                                                            const std::function<void(const MatrixView&)>& packed_one) {
  const size_t n_mats = mats.size();
  std::vector<const mm::IsaKernels*> packer(n_mats);
  std::vector<mm::QFormat> fmt(n_mats);
  std::vector<size_t> size(n_mats), offset(n_mats, 0);
  size_t shared = 0;  // the small copies, one after another at 64-byte boundaries in the matrices' order
  for (size_t i = 0; i < n_mats; ++i) {
    packer[i] = Packer(*mats[i], &fmt[i], &size[i]);
    if (packer[i] == nullptr || size[i] >= kOwnMapping) continue;
    offset[i] = shared;
    shared += (size[i] + 63) & ~size_t{63};
  }
  std::vector<std::shared_ptr<uint8_t[]>> owners;
  std::shared_ptr<ZeroedPages> pages = shared > 0 ? std::make_shared<ZeroedPages>(shared) : nullptr;
  if (pages) owners.emplace_back(pages, static_cast<uint8_t*>(pages->get()));
  std::vector<std::shared_ptr<uint8_t[]>> own(n_mats);
  std::vector<size_t> own_bytes(n_mats, 0);
  auto pack = [&](int64_t task, int) {
    const size_t i = static_cast<size_t>(task);
    if (packer[i] == nullptr) return;
    if (size[i] >= kOwnMapping) {
      own[i] = PackOwned(packer[i], fmt[i], size[i], mats[i], &own_bytes[i]);
    } else {
      PackInto(packer[i], fmt[i], mats[i], static_cast<uint8_t*>(pages->get()) + offset[i]);
    }
    if (packed_one) packed_one(*mats[i]);
  };
  // Each matrix is packed by one thread: the copies do not depend on the split.
  if (pool != nullptr) {
    pool->ParallelFor(static_cast<int64_t>(n_mats), pack);
  } else {
    for (size_t i = 0; i < n_mats; ++i) pack(static_cast<int64_t>(i), 0);
  }
  size_t total = pages ? pages->size() : 0;
  for (size_t i = 0; i < n_mats; ++i) {
    if (own[i] == nullptr) continue;
    owners.push_back(std::move(own[i]));
    total += own_bytes[i];
  }
  if (bytes) *bytes = total;
  return owners;
}

}  // namespace parallm
