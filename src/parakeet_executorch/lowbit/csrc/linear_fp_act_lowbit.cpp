// ExecuTorch portable-runtime kernels for torchao::_linear_fp_act_{n}bit_weight.out, n = 1..8.
//
// Format (see parakeet_executorch/lowbit/__init__.py): A [M, K] float/half/bfloat16;
// B uint8 [N, K*n/8], each row an LSB-first stream of n-bit values along K;
// S, Z [N, K/group_size] in A's dtype; out[m, r] = sum_k A[m, k] * (q[r, k] * S[r, g] + Z[r, g]).
//
// The kernel never materializes the dequantized weight: it expands one tile of 8 weight rows at
// a time into a small float buffer (8 * K floats, cache resident) and reuses it for every row of A.
// Built against the executorch wheel's SDK (kernel_util + libexecutorch.so); loading the
// shared library registers the kernels through static initializers.

#include <executorch/extension/kernel_util/make_boxed_from_unboxed_functor.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/kernel/kernel_includes.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace parakeet_lowbit {

using executorch::aten::BFloat16;
using executorch::aten::Half;
using executorch::aten::ScalarType;
using executorch::aten::SizesType;
using executorch::aten::Tensor;
using executorch::runtime::Error;
using executorch::runtime::KernelRuntimeContext;

// Unpack one row of K n-bit values (LSB-first bit stream) into floats.
template <int NBIT>
inline void unpack_row(const uint8_t* src, int64_t K, float* dst) {
  if constexpr (NBIT == 8) {
    for (int64_t k = 0; k < K; ++k) dst[k] = static_cast<float>(src[k]);
  } else if constexpr (8 % NBIT == 0) {
    constexpr int per_byte = 8 / NBIT;
    constexpr uint32_t mask = (1u << NBIT) - 1u;
    for (int64_t b = 0; b < K / per_byte; ++b) {
      const uint32_t v = src[b];
      for (int i = 0; i < per_byte; ++i) {
        dst[b * per_byte + i] = static_cast<float>((v >> (i * NBIT)) & mask);
      }
    }
  } else {
    // 3, 5, 6, 7 bits: take 8 values (NBIT bytes) at a time as one 64-bit little-endian word.
    constexpr uint64_t mask = (1ull << NBIT) - 1ull;
    for (int64_t u = 0; u < K / 8; ++u) {
      uint64_t w = 0;
      for (int b = 0; b < NBIT; ++b) w |= static_cast<uint64_t>(src[u * NBIT + b]) << (8 * b);
      for (int i = 0; i < 8; ++i) dst[u * 8 + i] = static_cast<float>((w >> (i * NBIT)) & mask);
    }
  }
}

template <typename CTYPE, int NBIT>
void linear_impl(const Tensor& A, const Tensor& B, int64_t group_size, const Tensor& S, const Tensor& Z, Tensor& out) {
  constexpr int NR = 8;  // weight rows per tile: each activation load feeds NR dot products
  const int64_t M = A.size(0), K = A.size(1), N = B.size(0);
  const int64_t G = K / group_size;
  const int64_t row_bytes = K * NBIT / 8;
  const CTYPE* a_src = A.const_data_ptr<CTYPE>();
  const uint8_t* b = B.const_data_ptr<uint8_t>();
  const CTYPE* s_src = S.const_data_ptr<CTYPE>();
  const CTYPE* z_src = Z.const_data_ptr<CTYPE>();
  CTYPE* y = out.mutable_data_ptr<CTYPE>();

  // Activations as float (a no-op copy for fp32 keeps one code path).
  std::vector<float> a(static_cast<size_t>(M * K));
  for (int64_t i = 0; i < M * K; ++i) a[i] = static_cast<float>(a_src[i]);
  // One tile of NR weight rows, expanded to float in cache (NR * K floats), reused for all M rows.
  std::vector<float> w(static_cast<size_t>(NR * K), 0.f);
  for (int64_t r0 = 0; r0 < N; r0 += NR) {
    const int nr = static_cast<int>(std::min<int64_t>(NR, N - r0));
    for (int i = 0; i < nr; ++i) {
      float* wr = w.data() + i * K;
      unpack_row<NBIT>(b + (r0 + i) * row_bytes, K, wr);
      for (int64_t g = 0; g < G; ++g) {
        const float sc = static_cast<float>(s_src[(r0 + i) * G + g]);
        const float zc = static_cast<float>(z_src[(r0 + i) * G + g]);
        float* wg = wr + g * group_size;
#pragma omp simd
        for (int64_t j = 0; j < group_size; ++j) wg[j] = wg[j] * sc + zc;
      }
    }
    if (nr < NR) std::fill(w.begin() + nr * K, w.end(), 0.f);
    const float* w0 = w.data();
    const float* w1 = w0 + K;
    const float* w2 = w1 + K;
    const float* w3 = w2 + K;
    const float* w4 = w3 + K;
    const float* w5 = w4 + K;
    const float* w6 = w5 + K;
    const float* w7 = w6 + K;
    for (int64_t m = 0; m < M; ++m) {
      const float* am = a.data() + m * K;
      float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f, d4 = 0.f, d5 = 0.f, d6 = 0.f, d7 = 0.f;
#pragma omp simd reduction(+ : d0, d1, d2, d3, d4, d5, d6, d7)
      for (int64_t k = 0; k < K; ++k) {
        const float av = am[k];
        d0 += av * w0[k];
        d1 += av * w1[k];
        d2 += av * w2[k];
        d3 += av * w3[k];
        d4 += av * w4[k];
        d5 += av * w5[k];
        d6 += av * w6[k];
        d7 += av * w7[k];
      }
      const float d[NR] = {d0, d1, d2, d3, d4, d5, d6, d7};
      for (int i = 0; i < nr; ++i) y[m * N + r0 + i] = static_cast<CTYPE>(d[i]);
    }
  }
}

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
  switch (A.scalar_type()) {
    case ScalarType::Float: linear_impl<float, NBIT>(A, B, group_size, S, Z, out); break;
    case ScalarType::Half: linear_impl<Half, NBIT>(A, B, group_size, S, Z, out); break;
    case ScalarType::BFloat16: linear_impl<BFloat16, NBIT>(A, B, group_size, S, Z, out); break;
    default: ET_KERNEL_CHECK_MSG(ctx, false, InvalidArgument, out, "A must be float32, float16 or bfloat16");
  }
  return out;
}

}  // namespace parakeet_lowbit

EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_1bit_weight.out", parakeet_lowbit::linear_out<1>);
EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_2bit_weight.out", parakeet_lowbit::linear_out<2>);
EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_3bit_weight.out", parakeet_lowbit::linear_out<3>);
EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_4bit_weight.out", parakeet_lowbit::linear_out<4>);
EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_5bit_weight.out", parakeet_lowbit::linear_out<5>);
EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_6bit_weight.out", parakeet_lowbit::linear_out<6>);
EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_7bit_weight.out", parakeet_lowbit::linear_out<7>);
EXECUTORCH_LIBRARY(torchao, "_linear_fp_act_8bit_weight.out", parakeet_lowbit::linear_out<8>);
