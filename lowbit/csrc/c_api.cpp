// C ABI of the kernels for PyTorch eager (fpa_lowbit/_native.py loads this library with ctypes). A C ABI over raw
// pointers keeps one binary valid for every torch version: nothing here depends on libtorch.
//
// Threads: thread_pool.h's pool (torch's intra-op pool is not reachable without linking libtorch); the caller passes
// torch.get_num_threads().
#include <cstdint>
#include <functional>

#include "lowbit_kernel.h"
#include "thread_pool.h"

extern "C" {

// Bumped whenever a signature below changes; the Python loader checks it.
__attribute__((visibility("default"))) int fpa_lowbit_abi_version(void) { return 2; }

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
  if (num_threads > 1) {
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
