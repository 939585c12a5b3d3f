// ExecuTorch kernels for torchao::_linear_fp_act_{n}bit_weight.out, n = 1..8, over the shared CPU kernels
// (lowbit_kernel.h), on ExecuTorch's own thread pool (the one its XNNPACK delegate uses).
//
// Format (fpa_lowbit's spec): A [M, K] float/half/bfloat16; B uint8 [N, K*n/8]; S, Z [N, K/group_size] in A's dtype;
// out[m, r] = sum_k A[m, k] * (q[r, k] * S[r, g] + Z[r, g]). Half and bfloat16 operands are widened to float, the
// product is computed in float and rounded once on the way out.
//
// Built against the executorch wheel's SDK. As a shared library, loading it (dlopen) registers the kernels with the
// runtime in libexecutorch.so through static initializers; as a static archive it is linked whole into a runner.

#include <executorch/extension/kernel_util/make_boxed_from_unboxed_functor.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/kernel/kernel_includes.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

#include "lowbit_kernel.h"

// The executorch wheel ships libexecutorch_threadpool.so but not extension/threadpool/threadpool.h: these are the
// two declarations this file needs from it (pthreadpool's stable C API, and the accessor that XNNPACK's delegate
// calls for the same pool).
extern "C" {
typedef struct pthreadpool* pthreadpool_t;
size_t pthreadpool_get_threads_count(pthreadpool_t threadpool);
void pthreadpool_parallelize_1d(pthreadpool_t threadpool, void (*function)(void*, size_t), void* context, size_t range,
                                uint32_t flags);
}
namespace executorch::extension::threadpool {
pthreadpool_t get_pthreadpool();
}  // namespace executorch::extension::threadpool

namespace fpa_lowbit_executorch {

using executorch::aten::BFloat16;
using executorch::aten::Half;
using executorch::aten::ScalarType;
using executorch::aten::SizesType;
using executorch::aten::Tensor;
using executorch::runtime::Error;
using executorch::runtime::KernelRuntimeContext;

// Threads: ExecuTorch's own thread pool, the pthreadpool that its XNNPACK delegate runs on
// (libexecutorch_threadpool.so's get_pthreadpool()), so a .pte runs on one set of threads whose size the runtime
// sets. A pool of our own beside it (as before) left idle helpers spinning on the cores XNNPACK's threads needed;
// on a 2-vCPU AMD EPYC (Zen 4) the swap measured even within that machine's noise (one fpa4w feed-forward block at
// 125 rows 2-6 % faster, at 625 rows 2-3 % slower; the full-size fpa4w encoder the same within +-15 %).
// pthreadpool hands each thread a run of task indices and lets it steal from the others when done, so uneven tasks
// still balance; each output element is computed by one task in a fixed order, so the bits do not depend on which
// thread ran it.
fpa_lowbit::ParallelFor thread_pool() {
  pthreadpool_t pool = executorch::extension::threadpool::get_pthreadpool();
  if (pool == nullptr || pthreadpool_get_threads_count(pool) <= 1) return {};  // linear_f32 then runs serially
  return [pool](int64_t n, const std::function<void(int64_t)>& task) {
    auto run_one = [](void* context, size_t i) {
      (*static_cast<const std::function<void(int64_t)>*>(context))(static_cast<int64_t>(i));
    };
    pthreadpool_parallelize_1d(pool, run_one, const_cast<std::function<void(int64_t)>*>(&task), static_cast<size_t>(n),
                               0);
  };
}

template <typename CTYPE>
const float* as_float(const Tensor& t, std::vector<float>& storage) {
  if constexpr (std::is_same_v<CTYPE, float>) {
    return t.const_data_ptr<float>();
  } else {
    const CTYPE* src = t.const_data_ptr<CTYPE>();
    storage.resize(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < storage.size(); ++i) storage[i] = static_cast<float>(src[i]);
    return storage.data();
  }
}

template <typename CTYPE>
int run(const Tensor& A, const Tensor& B, int64_t group_size, const Tensor& S, const Tensor& Z, int nbit, Tensor& out) {
  std::vector<float> a_buf, s_buf, z_buf, y_buf;
  fpa_lowbit::LinearArgs args;
  args.M = A.size(0);
  args.K = A.size(1);
  args.N = B.size(0);
  args.B = B.const_data_ptr<uint8_t>();
  args.nbit = nbit;
  args.group_size = static_cast<int>(group_size);
  args.A = as_float<CTYPE>(A, a_buf);
  args.S = as_float<CTYPE>(S, s_buf);
  args.Z = as_float<CTYPE>(Z, z_buf);
  if constexpr (std::is_same_v<CTYPE, float>) {
    args.out = out.mutable_data_ptr<float>();
  } else {
    y_buf.resize(static_cast<size_t>(args.M * args.N));
    args.out = y_buf.data();
  }
  const int rc = fpa_lowbit::linear_f32(args, fpa_lowbit::Isa::kAuto, thread_pool());
  if constexpr (!std::is_same_v<CTYPE, float>) {
    CTYPE* y = out.mutable_data_ptr<CTYPE>();
    for (size_t i = 0; i < y_buf.size(); ++i) y[i] = static_cast<CTYPE>(y_buf[i]);
  }
  return rc;
}

// Time spent in these kernels since the library was loaded (or last reset), for the benchmarks' "share of the
// encoder" figure: read with fpa_lowbit_executorch_kernel_stats().
std::atomic<int64_t> g_kernel_ns{0};
std::atomic<int64_t> g_kernel_calls{0};

template <int NBIT>
Tensor& linear_out(KernelRuntimeContext& ctx, const Tensor& A, const Tensor& B, int64_t group_size, const Tensor& S,
                   const Tensor& Z, Tensor& out) {
  ET_KERNEL_CHECK_MSG(ctx, A.dim() == 2, InvalidArgument, out, "A must be 2-D [M, K]");
  ET_KERNEL_CHECK_MSG(ctx, B.dim() == 2 && B.scalar_type() == ScalarType::Byte, InvalidArgument, out,
                      "B must be a 2-D uint8 tensor");
  ET_KERNEL_CHECK_MSG(ctx, group_size == 32 || group_size == 64 || group_size == 128 || group_size == 256,
                      InvalidArgument, out, "group_size must be 32, 64, 128 or 256");
  const int64_t M = A.size(0), K = A.size(1), N = B.size(0);
  ET_KERNEL_CHECK_MSG(ctx, K % 8 == 0, InvalidArgument, out, "K must be a multiple of 8");
  ET_KERNEL_CHECK_MSG(ctx, K % group_size == 0, InvalidArgument, out, "K must be a multiple of group_size");
  ET_KERNEL_CHECK_MSG(ctx, B.size(1) == K * NBIT / 8, InvalidArgument, out, "B must be [N, K*nbit/8]");
  const int64_t G = K / group_size;
  ET_KERNEL_CHECK_MSG(ctx, S.dim() == 2 && S.size(0) == N && S.size(1) == G, InvalidArgument, out,
                      "S must be [N, K/group_size]");
  ET_KERNEL_CHECK_MSG(ctx, Z.dim() == 2 && Z.size(0) == N && Z.size(1) == G, InvalidArgument, out,
                      "Z must be [N, K/group_size]");
  ET_KERNEL_CHECK_MSG(
      ctx,
      S.scalar_type() == A.scalar_type() && Z.scalar_type() == A.scalar_type() && out.scalar_type() == A.scalar_type(),
      InvalidArgument, out, "S, Z and out must have A's dtype");
  const SizesType new_sizes[2] = {static_cast<SizesType>(M), static_cast<SizesType>(N)};
  ET_KERNEL_CHECK_MSG(ctx, executorch::runtime::resize_tensor(out, {new_sizes, 2}) == Error::Ok, InvalidArgument, out,
                      "could not resize out to [M, N]");
  int rc = 0;
  const auto t0 = std::chrono::steady_clock::now();
  switch (A.scalar_type()) {
    case ScalarType::Float: rc = run<float>(A, B, group_size, S, Z, NBIT, out); break;
    case ScalarType::Half: rc = run<Half>(A, B, group_size, S, Z, NBIT, out); break;
    case ScalarType::BFloat16: rc = run<BFloat16>(A, B, group_size, S, Z, NBIT, out); break;
    default: ET_KERNEL_CHECK_MSG(ctx, false, InvalidArgument, out, "A must be float32, float16 or bfloat16");
  }
  g_kernel_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  ++g_kernel_calls;
  ET_KERNEL_CHECK_MSG(ctx, rc == 0, InvalidArgument, out, "fpa_lowbit kernel rejected its arguments");
  return out;
}

}  // namespace fpa_lowbit_executorch

extern "C" {
// Seconds and calls spent in the kernels since load or the last reset; reset when `reset` is nonzero.
__attribute__((visibility("default"))) void fpa_lowbit_executorch_kernel_stats(double* seconds, int64_t* calls,
                                                                               int reset) {
  *seconds = static_cast<double>(fpa_lowbit_executorch::g_kernel_ns.load()) * 1e-9;
  *calls = fpa_lowbit_executorch::g_kernel_calls.load();
  if (reset != 0) {
    fpa_lowbit_executorch::g_kernel_ns = 0;
    fpa_lowbit_executorch::g_kernel_calls = 0;
  }
}
}

EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_1bit_weight.out", fpa_lowbit_executorch::linear_out<1>);
EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_2bit_weight.out", fpa_lowbit_executorch::linear_out<2>);
EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_3bit_weight.out", fpa_lowbit_executorch::linear_out<3>);
EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_4bit_weight.out", fpa_lowbit_executorch::linear_out<4>);
EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_5bit_weight.out", fpa_lowbit_executorch::linear_out<5>);
EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_6bit_weight.out", fpa_lowbit_executorch::linear_out<6>);
EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_7bit_weight.out", fpa_lowbit_executorch::linear_out<7>);
EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_8bit_weight.out", fpa_lowbit_executorch::linear_out<8>);
