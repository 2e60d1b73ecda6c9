// ThreadPool: workers spin briefly on a generation counter (a decode step issues ~170 loops back to back),
// then sleep on a condition variable so an idle process uses no CPU.
#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PARALLM_CPU_RELAX() _mm_pause()
#else
#define PARALLM_CPU_RELAX() std::this_thread::yield()
#endif

#include "util/check.h"

namespace parallm {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (num_threads <= 0) num_threads = 1;
  for (int t = 1; t < num_threads; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    ++generation_;
    published_generation_.store(generation_, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::RunTasks(int thread) {
  for (;;) {
    int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= num_tasks_) break;
    (*fn_)(task, thread);
  }
}

void ThreadPool::ParallelFor(int64_t num_tasks, const std::function<void(int64_t, int)>& fn) {
  if (num_tasks <= 0) return;
  if (workers_.empty() || num_tasks == 1) {
    for (int64_t i = 0; i < num_tasks; ++i) fn(i, 0);
    return;
  }
  PARALLM_CHECK(active_workers_.load() == 0);
  fn_ = &fn;
  num_tasks_ = num_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  active_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
    published_generation_.store(generation_, std::memory_order_release);
  }
  wake_.notify_all();
  RunTasks(0);
  // Workers finish their last task within microseconds when they have a core: spin on the counter with a
  // pause (no system call), and after ~10 us yield, so a worker that shares our core (an oversubscribed,
  // noisy machine) gets to run instead of us spinning.
  for (int spins = 0; active_workers_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 200) {
      PARALLM_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    // Spin for a short while before sleeping: consecutive loops arrive microseconds apart (a decode step's
    // ~170 matmuls, and the serial work between them). Pause-spin, reading the clock only every 64 rounds;
    // one sched_yield per 64 rounds, not per round.
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(300);
    for (int i = 0; published_generation_.load(std::memory_order_acquire) == seen; ++i) {
      PARALLM_CPU_RELAX();
      if ((i & 63) == 63) {
        if (std::chrono::steady_clock::now() >= spin_until) break;
        std::this_thread::yield();  // rarely: lets a thread sharing this core run on an oversubscribed machine
      }
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (stop_) return;
    }
    RunTasks(thread);
    active_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void CountTasks(std::span<TaskCut> parts, int64_t target, int threads) {
  int64_t total_work = 0, n_total = 0;
  size_t largest = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    total_work += std::max<int64_t>(parts[i].work, 0);
    if (parts[i].work > parts[largest].work) largest = i;
  }
  for (TaskCut& p : parts) {
    p.n = p.work <= 0 || p.units <= 0
              ? 0
              : std::clamp<int64_t>(std::llround(static_cast<double>(p.work) * static_cast<double>(target) /
                                                 static_cast<double>(total_work)),
                                    1, p.units);
    n_total += p.n;
  }
  if (threads > 1 && n_total % threads != 0) {
    TaskCut& p = parts[largest];
    p.n = std::min(p.units, p.n + threads - n_total % threads);
  }
}

}  // namespace parallm
