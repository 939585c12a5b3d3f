// C ABI of the kernels for PyTorch eager (fpa_lowbit/_native.py loads this library with ctypes). A C ABI over raw
// pointers keeps one binary valid for every torch version: nothing here depends on libtorch.
//
// Threads: torch's intra-op pool where torch runs on OpenMP (the Python loader hands over the address of the
// OpenMP runtime's GOMP_parallel that torch loaded, so no libtorch or libgomp is linked here), else thread_pool.h's
// own pool; the caller passes torch.get_num_threads(). A second pool beside torch's loses: between torch's ops its
// OpenMP workers spin waiting for the next parallel region, and on two cores they and our helper took turns (a
// quantized Qwen2 decoded at 0.72-0.92x fp32's speed on two threads, 1.72-1.79x without that contention).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>

#include "lowbit_kernel.h"
#include "thread_pool.h"

extern "C" {

// Bumped whenever a signature below changes; the Python loader checks it.
__attribute__((visibility("default"))) int fpa_lowbit_abi_version(void) { return 3; }

namespace {

// libgomp's entry point for `#pragma omp parallel` (LLVM's libomp exports it too): runs fn(data) on a team of
// num_threads threads, the caller included, and returns when all are done.
using GompParallel = void (*)(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags);
std::atomic<GompParallel> g_gomp_parallel{nullptr};
std::atomic<pid_t> g_gomp_pid{0};  // a child of fork() has no OpenMP team: it takes the own pool

struct OmpJob {
  const std::function<void(int64_t)>* task;
  int64_t n;
  std::atomic<int64_t> next{0};
};

void omp_worker(void* p) {
  auto* job = static_cast<OmpJob*>(p);
  for (int64_t i = job->next.fetch_add(1); i < job->n; i = job->next.fetch_add(1)) (*job->task)(i);
}

}  // namespace

// Hands over the OpenMP runtime's GOMP_parallel (null: back to the own pool). Returns 0.
__attribute__((visibility("default"))) int fpa_lowbit_set_openmp(void* gomp_parallel) {
  g_gomp_parallel.store(reinterpret_cast<GompParallel>(gomp_parallel));
  g_gomp_pid.store(getpid());
  return 0;
}

// 1 when the eager kernels run on the handed-over OpenMP runtime in this process, else 0.
__attribute__((visibility("default"))) int fpa_lowbit_uses_openmp(void) {
  return g_gomp_parallel.load() != nullptr && g_gomp_pid.load() == getpid() ? 1 : 0;
}

__attribute__((visibility("default"))) int fpa_lowbit_linear_f32(const float* A, int64_t M, int64_t K, const uint8_t* B,
                                                                 int64_t N, int nbit, int group_size, const float* S,
                                                                 const float* Z, const float* bias, float* out, int isa,
                                                                 int num_threads) {
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
  args.bias = bias;  // null: no bias
  fpa_lowbit::ParallelFor pf;
  if (num_threads > 1 && fpa_lowbit_uses_openmp()) {
    pf = [num_threads](int64_t n, const std::function<void(int64_t)>& task) {
      // Tasks are claimed from one counter, so which thread runs which task never changes a result's bits.
      OmpJob job;
      job.task = &task;
      job.n = n;
      g_gomp_parallel.load()(omp_worker, &job, static_cast<unsigned>(std::min<int64_t>(num_threads, n)), 0);
    };
  } else if (num_threads > 1) {
    pf = [num_threads](int64_t n, const std::function<void(int64_t)>& task) {
      fpa_lowbit::pool().run(num_threads, n, task);
    };
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

__attribute__((visibility("default"))) double fpa_lowbit_fma_peak_gflops(int isa, int num_threads) {
  fpa_lowbit::ParallelFor pf = [num_threads](int64_t n, const std::function<void(int64_t)>& task) {
    fpa_lowbit::pool().run(num_threads, n, task);
  };
  return fpa_lowbit::fma_peak_gflops(static_cast<fpa_lowbit::Isa>(isa), num_threads, pf);
}

__attribute__((visibility("default"))) const char* fpa_lowbit_error_message(int code) {
  return fpa_lowbit::message(code);
}

}  // extern "C"
