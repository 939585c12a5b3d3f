// fpa_lowbit CPU kernels: out[M, N] = A[M, K] @ dequant(B)^T, weight-only n-bit (n = 1..8) with float
// activations, in the format of fpa_lowbit's spec (torchao's _linear_fp_act_{n}bit_weight):
//   B uint8 [N, K*n/8], each row an LSB-first bit stream of n-bit values q along K;
//   S, Z [N, K/group_size]; w[r, k] = q[r, k] * S[r, k/g] + Z[r, k/g].
//
// One source serves PyTorch eager (through the C ABI in c_api.cpp, loaded with ctypes, so one binary works with
// every torch version) and the ExecuTorch runtime (executorch_kernels.cpp). The caller supplies the thread pool.
//
// Two algorithms, chosen by M:
//   * GEMV (M <= kGemvMaxRows, 4- and 8-bit): per group, y += S * dot(q, a) + Z * sum(a); the weight is read once per
//     activation row and never expanded. With AVX-512 (and K a multiple of 128) a row is read as 32-bit words of
//     8 nibbles against activations transposed once per call, else as bytes against even/odd activations; 8-bit
//     rows are widened bytes against the activation row as it is.
//   * GEMM (otherwise): one K block (KC) at a time, A's block is repacked into MR-row micro-panels (k-major,
//     contiguous broadcasts), and each task expands its block of weight rows to float panels [KC][NR] kept in L1/L2
//     and runs a register-blocked MR x NR micro-kernel (broadcast A, FMA into NR-wide accumulators) of every A
//     micro-panel over them. All threads work on the same K block of A, so A is read from memory once per call
//     however many weight-row blocks there are; the expansion is paid once per call and reused by all M rows.
// Scratch (repacked activations, expanded panels) lives in per-thread buffers that only grow: a few hundred KB
// per thread, plus M KB on the calling thread.
// Each output element is computed by one task in a fixed order, so any thread count gives the same bits; an
// optional bias is added after the product (the same rounding as adding it to the result).
#pragma once

#include <cstdint>
#include <functional>

namespace fpa_lowbit {

// Instruction-set levels, in order of preference. kAuto picks the best this CPU supports.
enum class Isa : int { kAuto = 0, kPortable = 1, kAvx2 = 2, kAvx512 = 3, kNeon = 4 };

// Runs task(i) for i in [0, n_tasks), possibly concurrently, and returns when all have finished.
using ParallelFor = std::function<void(int64_t n_tasks, const std::function<void(int64_t)>& task)>;

struct LinearArgs {
  const float* A = nullptr;  // [M, K] row-major
  int64_t M = 0, K = 0, N = 0;
  const uint8_t* B = nullptr;  // [N, K * nbit / 8]
  int nbit = 4;
  int group_size = 32;
  const float* S = nullptr;     // [N, K / group_size]
  const float* Z = nullptr;     // [N, K / group_size]
  float* out = nullptr;         // [M, N] row-major
  const float* bias = nullptr;  // [N], added to every row of out; none when null
};

// At or below this many activation rows, 4- and 8-bit weights take the GEMV path.
constexpr int64_t kGemvMaxRows = 4;

// True when this build has the level and this CPU can run it.
bool isa_available(Isa isa);
// The level kAuto resolves to on this CPU.
Isa best_isa();
const char* isa_name(Isa isa);

// Returns 0 on success, or a nonzero code when the arguments break the format's rules (see check_args) or the
// requested level is unavailable. Single-threaded when parallel_for is empty.
int linear_f32(const LinearArgs& args, Isa isa, const ParallelFor& parallel_for);

// The FMA ceiling of one level: GFLOP/s of a register-only loop of independent vector FMAs, run on `threads`
// threads at once (the benchmarks' compute roof). 0 when the level is unavailable.
double fma_peak_gflops(Isa isa, int threads, const ParallelFor& parallel_for);

// 0 when the shapes are valid, else an error code; message() describes it.
int check_args(const LinearArgs& args);
const char* message(int code);

namespace detail {
// One implementation per level (kernel_impl.h compiled with that level's target flags).
#define FPA_LOWBIT_DECLARE(ns)                                          \
  namespace ns {                                                        \
  void linear(const LinearArgs& args, const ParallelFor& parallel_for); \
  double fma_flops(int64_t iterations);                                 \
  }
FPA_LOWBIT_DECLARE(portable)
FPA_LOWBIT_DECLARE(avx2)
FPA_LOWBIT_DECLARE(avx512)
FPA_LOWBIT_DECLARE(neon)
#undef FPA_LOWBIT_DECLARE
}  // namespace detail

}  // namespace fpa_lowbit
