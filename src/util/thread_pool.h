// ThreadPool: persistent worker threads that split one parallel loop at a time with low dispatch overhead; SplitRange
// and CountTasks cut a loop into tasks for it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace parallm {

class ThreadPool {
 public:
  // `num_threads` counts the calling thread, which always takes part; 0 means one per hardware thread.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(task, thread) for every task in [0, num_tasks), spread over the threads; returns when all are done.
  // Tasks are claimed dynamically, so which thread runs a task varies: results must not depend on it.
  // Not reentrant: fn must not call ParallelFor on the same pool.
  void ParallelFor(int64_t num_tasks, const std::function<void(int64_t task, int thread)>& fn);

 private:
  void WorkerLoop(int thread);
  void RunTasks(int thread);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  uint64_t generation_ = 0;  // bumped per ParallelFor; guarded by mu_
  bool stop_ = false;        // guarded by mu_

  const std::function<void(int64_t, int)>* fn_ = nullptr;
  int64_t num_tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> active_workers_{0};
  std::atomic<uint64_t> published_generation_{0};
};

// Splits [0, n) into `parts` contiguous ranges; returns the [begin, end) of range `part`.
inline std::pair<int64_t, int64_t> SplitRange(int64_t n, int64_t parts, int64_t part) {
  int64_t base = n / parts, extra = n % parts;
  int64_t begin = part * base + (part < extra ? part : extra);
  return {begin, begin + base + (part < extra ? 1 : 0)};
}

// One part of a parallel loop cut into tasks (CountTasks): `units` of work (a matrix's row groups, say) costing `work`
// in all, cut into `n` tasks. Task t covers units SplitRange(units, n, t): equal within one unit, the larger first.
struct TaskCut {
  int64_t units = 0, work = 0, n = 0;
};

// Sets each part's n: about `target` tasks in all, each part's share by its work (at least one task, at most one per
// unit, none without work or units), the count made a multiple of `threads` where the part with the most work has
// units to spare. Equal tasks claimed dynamically let the threads finish together; cut at a fixed size instead, the
// last task was a remainder (a 64-sequence decode step's gated MLP: 15 tasks and a fifth, so one thread waited most
// of a task, ~3% of the step).
void CountTasks(std::span<TaskCut> parts, int64_t target, int threads);

}  // namespace parallm
