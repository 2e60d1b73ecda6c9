// MatMul dispatch: picks the kernel path (ActiveIsa), quantizes the activations once per call, and splits
// the weight rows over the thread pool in whole row groups (one group = one SIMD register of rows).
// Which thread runs which rows never changes a result: each output is computed by exactly one task with
// the same operations as any other split would use (see matmul_internal.h).
#include "kernels/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "kernels/cpu_features.h"
#include "kernels/matmul_internal.h"
#include "util/check.h"

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

// The path whose packed layout `isa` reads: AMX reads the AVX-512 panels.
IsaPath PackedLayout(IsaPath isa) { return isa == IsaPath::kAmx ? IsaPath::kAvx512 : isa; }

// Row-group ranges per task: enough tasks to balance two to a few threads (tasks are claimed dynamically),
// few enough that each streams a long run of rows.
int64_t NumTasks(int64_t groups, int threads) {
  if (threads <= 1) return 1;
  return std::max<int64_t>(1, std::min<int64_t>(groups, threads * 8));
}

}  // namespace

void MatMul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride, ThreadPool* pool) {
  const MatMulOut out{&w, y, y_stride};
  MatMulMulti(std::span<const MatMulOut>(&out, 1), x, n_tokens, pool);
}

void MatMulMulti(std::span<const MatMulOut> outs, const float* x, int64_t n_tokens, ThreadPool* pool) {
  for (const MatMulOut& o : outs) PARALLM_CHECK(o.y_stride >= o.w->rows && o.w->cols == outs[0].w->cols);
  if (n_tokens <= 0 || outs.empty()) return;
  const IsaPath isa = ActiveIsa();
  const mm::IsaKernels* k = KernelsFor(isa);
  if (k == nullptr) {
    for (const MatMulOut& o : outs) ref::MatMul(*o.w, x, n_tokens, o.y, o.y_stride, pool);
    return;
  }
  const int threads = pool ? pool->num_threads() : 1;
  const int64_t rg = k->row_group;
  auto parallel = [&](int64_t n, const std::function<void(int64_t, int)>& fn) {
    if (pool && n > 1) {
      pool->ParallelFor(n, fn);
    } else {
      for (int64_t i = 0; i < n; ++i) fn(i, 0);
    }
  };

  constexpr size_t kMaxOuts = 8;
  PARALLM_CHECK(outs.size() <= kMaxOuts);
  const size_t n_outs = outs.size();
  mm::QFormat fmts[kMaxOuts];
  bool quant[kMaxOuts];
  for (size_t i = 0; i < n_outs; ++i) quant[i] = mm::QuantFormatOf(*outs[i].w, &fmts[i]);

  // Float weights: the f32 path, one matrix at a time.
  for (size_t i = 0; i < n_outs; ++i) {
    if (quant[i] || outs[i].w->rows <= 0) continue;
    const MatrixView& w = *outs[i].w;
    const int64_t groups = (w.rows + rg - 1) / rg, tasks = NumTasks(groups, threads);
    mm::FloatArgs args{&w, x, n_tokens, outs[i].y, outs[i].y_stride};
    parallel(tasks, [&](int64_t task, int) {
      auto [g0, g1] = SplitRange(groups, tasks, task);
      k->float_rows(args, g0 * rg, std::min(w.rows, g1 * rg));
    });
  }

  // Quantized weights: one activation format per distinct (code offset, sub-blocks), quantized once.
  const int64_t cols = outs[0].w->cols;
  int n_acts = 0;
  int act_offset[kMaxOuts], act_subs[kMaxOuts], act_of[kMaxOuts];
  for (size_t i = 0; i < n_outs; ++i) {
    if (!quant[i] || outs[i].w->rows <= 0) continue;
    const int offset = k->code_offset(*outs[i].w, fmts[i]), subs = mm::SubBlocks(fmts[i]);
    int a = 0;
    while (a < n_acts && (act_offset[a] != offset || act_subs[a] != subs)) ++a;
    if (a == n_acts) {
      act_offset[a] = offset;
      act_subs[a] = subs;
      ++n_acts;
    }
    act_of[i] = a;
  }
  if (n_acts == 0) return;
  size_t act_bytes[kMaxOuts], total = 0;
  for (int a = 0; a < n_acts; ++a) total += act_bytes[a] = mm::ActsBytes(n_tokens, cols, act_subs[a]);
  uint8_t* buf = t_acts.Get(total);
  mm::QuantizedActs acts[kMaxOuts];
  for (int a = 0; a < n_acts; ++a) {
    acts[a] = mm::CarveActs(buf, n_tokens, cols, act_subs[a]);
    buf += act_bytes[a];
  }
  // Quantizing is ~1% of the multiply's work; split it over the pool only when there are many tokens.
  const int64_t qtasks = n_tokens >= 16 ? std::min<int64_t>(n_tokens / 8, threads * 2) : 1;
  parallel(qtasks * n_acts, [&](int64_t task, int) {
    const int a = static_cast<int>(task / qtasks);
    auto [t0, t1] = SplitRange(n_tokens, qtasks, task % qtasks);
    k->quantize_acts(x, t0, t1, act_offset[a], &acts[a]);
  });

  // Row-group tasks over all the matrices, about threads * 8 of them in all, claimed dynamically.
  struct Task {
    int out;
    int64_t r0, r1;
  };
  thread_local std::vector<Task> task_list;
  task_list.clear();
  int64_t total_groups = 0;
  for (size_t i = 0; i < n_outs; ++i)
    if (quant[i]) total_groups += (outs[i].w->rows + rg - 1) / rg;
  const int64_t per_task =
      threads <= 1 ? total_groups : std::max<int64_t>(1, (total_groups + threads * 8 - 1) / (threads * 8));
  mm::QuantArgs args[kMaxOuts];
  bool packed[kMaxOuts];
  for (size_t i = 0; i < n_outs; ++i) {
    if (!quant[i] || outs[i].w->rows <= 0) continue;
    const MatrixView& w = *outs[i].w;
    args[i] = mm::QuantArgs{&w, fmts[i], &acts[act_of[i]], outs[i].y, outs[i].y_stride};
    packed[i] = w.packed != nullptr && w.packed_isa == static_cast<int8_t>(PackedLayout(isa)) &&
                k->quant_rows_packed != nullptr;
    const int64_t groups = (w.rows + rg - 1) / rg;
    for (int64_t g0 = 0; g0 < groups; g0 += per_task)
      task_list.push_back(Task{static_cast<int>(i), g0 * rg, std::min(w.rows, std::min(groups, g0 + per_task) * rg)});
  }
  const std::vector<Task>& tl = task_list;
  size_t scratch_bytes = k->scratch_bytes(n_tokens, cols);
  parallel(static_cast<int64_t>(tl.size()), [&](int64_t t, int) {
    const Task& task = tl[static_cast<size_t>(t)];
    auto rows = packed[task.out] ? k->quant_rows_packed : k->quant_rows;
    rows(args[task.out], task.r0, task.r1, t_scratch.Get(scratch_bytes));
  });
}

std::shared_ptr<uint8_t[]> RepackForKernels(MatrixView* w, size_t* bytes) {
  if (bytes) *bytes = 0;
  const IsaPath isa = BestSupportedIsa();
  const mm::IsaKernels* k = KernelsFor(isa);
  mm::QFormat fmt;
  if (k == nullptr || k->pack == nullptr || !mm::QuantFormatOf(*w, &fmt) || w->rows <= 0) return nullptr;
  const size_t n = k->packed_bytes(*w, fmt);
  if (n == 0) return nullptr;
  // Large copies go on 2 MiB-aligned memory advised as transparent huge pages: a decode step streams every
  // weight once, and 4 KiB pages would cost a TLB walk per 64 cache lines (and ~130K page faults at load).
  constexpr size_t kHuge = size_t{2} << 20;
  std::shared_ptr<uint8_t[]> mem;
  size_t alloc = n + 64;
  uint8_t* p = nullptr;
  if (n >= kHuge / 2) {
    alloc = (n + 4095) / 4096 * 4096;  // the last partial 2 MiB stays in small pages, untouched ones unmapped
    void* raw = nullptr;
    PARALLM_CHECK(posix_memalign(&raw, kHuge, alloc) == 0);
    p = static_cast<uint8_t*>(raw);
#if defined(__linux__)
    madvise(p, alloc, MADV_HUGEPAGE);
#endif
    mem = std::shared_ptr<uint8_t[]>(p, [](uint8_t* q) { std::free(q); });
  } else {
    mem = std::shared_ptr<uint8_t[]>(new uint8_t[alloc]);
    p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(mem.get()) + 63) & ~uintptr_t{63});
  }
  k->pack(*w, fmt, p);
  w->packed = p;
  w->packed_isa = static_cast<int8_t>(PackedLayout(isa));
  if (bytes) *bytes = alloc;
  return mem;
}

}  // namespace parallm
