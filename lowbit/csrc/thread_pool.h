// A small persistent thread pool with dynamic scheduling (one atomic counter; the caller works too), for the eager
// C ABI where torch's intra-op pool is not OpenMP (the ExecuTorch kernels run on ExecuTorch's pool). Helpers spin
// briefly after a job before sleeping, so a model's next layer finds them awake. A child of fork() gets a fresh pool
// (the parent's threads do not exist there).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace fpa_lowbit {

class Pool {
 public:
  // Runs task(0..n-1) on up to `threads` threads (the caller is one of them).
  void run(int threads, int64_t n, const std::function<void(int64_t)>& task) {
    if (threads <= 1 || n <= 1) {
      for (int64_t i = 0; i < n; ++i) task(i);
      return;
    }
    std::lock_guard<std::mutex> one_job_at_a_time(call_mu_);
    const int helpers = static_cast<int>(std::min<int64_t>(threads, n)) - 1;
    {
      std::unique_lock<std::mutex> lk(mu_);
      while (static_cast<int>(workers_.size()) < helpers) {
        const int id = static_cast<int>(workers_.size());
        workers_.emplace_back([this, id] { loop(id); });
      }
      job_ = &task;
      n_ = n;
      next_.store(0);
      wanted_ = helpers;
      entered_ = 0;
      closed_ = false;
      finished_ = 0;
      ++generation_;
    }
    cv_.notify_all();
    drain(task, n);
    // Every helper that took this job must be done before `task` goes out of scope. They are usually a few
    // microseconds from done: spin first, since sleeping on the condition variable and being woken costs more
    // than that (it took a fifth of a 1 x 1024 x 1024 product on two threads).
    for (int i = 0; i < kSpinIterations && finished_.load(std::memory_order_acquire) != helpers; ++i) relax();
    std::unique_lock<std::mutex> lk(mu_);
    // The work is all claimed: close the job to helpers that have not taken it yet. A helper whose core is busy
    // with another process may not run for a scheduler time slice; waiting for it to wake only to find nothing
    // left made two threads on a shared core ~8x slower than one (1 x 1024 x 1024: ~500 against ~60 us).
    closed_ = true;
    done_cv_.wait(lk, [&] { return finished_.load() == entered_; });
    job_ = nullptr;
  }

 private:
  void drain(const std::function<void(int64_t)>& task, int64_t n) {
    for (int64_t i = next_.fetch_add(1); i < n; i = next_.fetch_add(1)) task(i);
  }

  void loop(int id) {
    uint64_t seen = 0;
    for (;;) {
      // A model calls its layers back to back: spin briefly before sleeping, so that the next call finds this
      // thread awake (a futex wake-up costs about as much as a small layer's whole product).
      for (int i = 0; i < kSpinIterations && generation_.load(std::memory_order_acquire) == seen; ++i) relax();
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return generation_.load() != seen; });
      seen = generation_.load();
      if (id >= wanted_ || closed_) continue;
      ++entered_;
      const std::function<void(int64_t)>* task = job_;
      const int64_t n = n_;
      lk.unlock();
      drain(*task, n);
      lk.lock();
      const int done = finished_.fetch_add(1, std::memory_order_acq_rel) + 1;
      if (done == wanted_ || (closed_ && done == entered_)) done_cv_.notify_all();
    }
  }

  static void relax() {
#if defined(__x86_64__) || defined(_M_X64)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  static constexpr int kSpinIterations = 20000;  // tens of microseconds

  std::mutex call_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
  int wanted_ = 0;
  int entered_ = 0;      // helpers that took the current job (under mu_)
  bool closed_ = false;  // the caller has claimed the rest: no helper may take the job now (under mu_)
  std::atomic<int> finished_{0};
  std::atomic<uint64_t> generation_{0};
};

inline Pool& pool() {
  // Leaked on purpose: no join at exit (threads blocked on a condition variable end with the process), and a
  // child of fork() gets a fresh pool because the parent's workers do not exist there.
  static Pool* p = nullptr;
  static pid_t owner = 0;
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  if (p == nullptr || owner != getpid()) {
    p = new Pool();
    owner = getpid();
  }
  return *p;
}

}  // namespace fpa_lowbit
