// C ABI of the kernels for PyTorch eager (fpa_lowbit/_native.py loads this library with ctypes). A C ABI over raw
// pointers keeps one binary valid for every torch version: nothing here depends on libtorch.
//
// Threads: a small persistent pool owned by this library (torch's intra-op pool is not reachable without linking
// libtorch); the caller passes torch.get_num_threads(). The pool is rebuilt after fork().
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "lowbit_kernel.h"

namespace {

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
      finished_ = 0;
      ++generation_;
    }
    cv_.notify_all();
    drain(task, n);
    std::unique_lock<std::mutex> lk(mu_);
    // Every helper of this generation must be done before `task` goes out of scope.
    done_cv_.wait(lk, [&] { return finished_ == wanted_; });
    job_ = nullptr;
  }

 private:
  void drain(const std::function<void(int64_t)>& task, int64_t n) {
    for (int64_t i = next_.fetch_add(1); i < n; i = next_.fetch_add(1)) task(i);
  }

  void loop(int id) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return generation_ != seen; });
      seen = generation_;
      if (id >= wanted_) continue;
      const std::function<void(int64_t)>* task = job_;
      const int64_t n = n_;
      lk.unlock();
      drain(*task, n);
      lk.lock();
      if (++finished_ == wanted_) done_cv_.notify_all();
    }
  }

  std::mutex call_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
  int wanted_ = 0, finished_ = 0;
  uint64_t generation_ = 0;
};

Pool& pool() {
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

}  // namespace

extern "C" {

// Bumped whenever a signature below changes; the Python loader checks it.
__attribute__((visibility("default"))) int fpa_lowbit_abi_version(void) { return 1; }

__attribute__((visibility("default"))) int fpa_lowbit_linear_f32(const float* A, int64_t M, int64_t K, const uint8_t* B,
                                                                 int64_t N, int nbit, int group_size, const float* S,
                                                                 const float* Z, float* out, int isa, int num_threads) {
  fpa_lowbit::LinearArgs args;
  args.A = A;
  args.M = M;
  args.K = K;
  args.N = N;
  args.B = B;
  args.nbit = nbit;
  args.group_size = group_size;
  args.S = S;
  args.Z = Z;
  args.out = out;
  fpa_lowbit::ParallelFor pf;
  if (num_threads > 1) {
    pf = [num_threads](int64_t n, const std::function<void(int64_t)>& task) { pool().run(num_threads, n, task); };
  }
  return fpa_lowbit::linear_f32(args, static_cast<fpa_lowbit::Isa>(isa), pf);
}

__attribute__((visibility("default"))) int fpa_lowbit_isa_available(int isa) {
  return fpa_lowbit::isa_available(static_cast<fpa_lowbit::Isa>(isa)) ? 1 : 0;
}

__attribute__((visibility("default"))) int fpa_lowbit_best_isa(void) {
  return static_cast<int>(fpa_lowbit::best_isa());
}

__attribute__((visibility("default"))) const char* fpa_lowbit_isa_name(int isa) {
  return fpa_lowbit::isa_name(static_cast<fpa_lowbit::Isa>(isa));
}

__attribute__((visibility("default"))) const char* fpa_lowbit_error_message(int code) {
  return fpa_lowbit::message(code);
}

}  // extern "C"
