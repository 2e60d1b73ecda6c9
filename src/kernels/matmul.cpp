// MatMul dispatch: picks the kernel path (ActiveIsa), quantizes the activations once per call, and splits
// the weight rows over the thread pool in whole row groups (one group = one SIMD register of rows).
// Which thread runs which rows never changes a result: each output is computed by exactly one task with
// the same operations as any other split would use (see matmul_internal.h).
#include "kernels/matmul.h"

#include <algorithm>
#include <memory>

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
    case IsaPath::kAvx512:
      return mm::Avx512Kernels();
    case IsaPath::kAvxVnni:
      return mm::AvxVnniKernels();
    case IsaPath::kAvx2:
      return mm::Avx2Kernels();
    default:
      // kScalar: the reference twin. TODO(neon): an ARM64 path (NEON + sdot/udot, 4 rows per 128-bit register,
      // the same panel design and per-lane formula) is not written: nothing here can build or test it, so
      // cpu_features never reports kNeon as supported and ARM64 runs the scalar twin.
      return nullptr;
  }
}

// Row-group ranges per task: enough tasks to balance two to a few threads (tasks are claimed dynamically),
// few enough that each streams a long run of rows.
int64_t NumTasks(int64_t groups, int threads) {
  if (threads <= 1) return 1;
  return std::max<int64_t>(1, std::min<int64_t>(groups, threads * 8));
}

}  // namespace

void MatMul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride, ThreadPool* pool) {
  PARALLM_CHECK(y_stride >= w.rows);
  if (n_tokens <= 0 || w.rows <= 0) return;
  const mm::IsaKernels* k = KernelsFor(ActiveIsa());
  if (k == nullptr) {
    ref::MatMul(w, x, n_tokens, y, y_stride, pool);
    return;
  }
  const int threads = pool ? pool->num_threads() : 1;
  const int64_t rg = k->row_group;
  const int64_t groups = (w.rows + rg - 1) / rg;
  const int64_t tasks = NumTasks(groups, threads);
  auto rows_of = [&](int64_t task) {
    auto [g0, g1] = SplitRange(groups, tasks, task);
    return std::pair<int64_t, int64_t>{g0 * rg, std::min(w.rows, g1 * rg)};
  };
  auto parallel = [&](int64_t n, const std::function<void(int64_t, int)>& fn) {
    if (pool && n > 1) {
      pool->ParallelFor(n, fn);
    } else {
      for (int64_t i = 0; i < n; ++i) fn(i, 0);
    }
  };

  mm::QFormat fmt;
  if (!mm::QuantFormatOf(w, &fmt)) {
    mm::FloatArgs args{&w, x, n_tokens, y, y_stride};
    parallel(tasks, [&](int64_t task, int) {
      auto [r0, r1] = rows_of(task);
      k->float_rows(args, r0, r1);
    });
    return;
  }

  const int subs = mm::SubBlocks(fmt);
  mm::QuantizedActs acts = mm::CarveActs(t_acts.Get(mm::ActsBytes(n_tokens, w.cols, subs)), n_tokens, w.cols, subs);
  const int offset = k->code_offset(w, fmt);
  // Quantizing is ~1% of the multiply's work; split it over the pool only when there are many tokens.
  const int64_t qtasks = n_tokens >= 16 ? std::min<int64_t>(n_tokens / 8, threads * 2) : 1;
  parallel(qtasks, [&](int64_t task, int) {
    auto [t0, t1] = SplitRange(n_tokens, qtasks, task);
    k->quantize_acts(x, t0, t1, offset, &acts);
  });

  mm::QuantArgs args{&w, fmt, &acts, y, y_stride};
  const size_t scratch_bytes = k->scratch_bytes(n_tokens);
  parallel(tasks, [&](int64_t task, int) {
    auto [r0, r1] = rows_of(task);
    k->quant_rows(args, r0, r1, t_scratch.Get(scratch_bytes));
  });
}

}  // namespace parallm
