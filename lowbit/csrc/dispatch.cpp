// Argument checks and the choice of instruction-set level at run time (one binary for every CPU of an arch).
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "lowbit_kernel.h"

namespace fpa_lowbit {

namespace {

bool compiled_in(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return true;
#if defined(__x86_64__) || defined(_M_X64)
    case Isa::kAvx2: return true;
    case Isa::kAvx512: return true;
#endif
#if defined(__aarch64__)
    case Isa::kNeon: return true;
#endif
    default: return false;
  }
}

bool cpu_has(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return true;
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
    case Isa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::kAvx512: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2");
#endif
#if defined(__aarch64__)
    case Isa::kNeon: return true;  // Advanced SIMD is part of the arm64 base architecture
#endif
    default: return false;
  }
}

}  // namespace

bool isa_available(Isa isa) {
  if (isa == Isa::kAuto) return true;
  return compiled_in(isa) && cpu_has(isa);
}

Isa best_isa() {
  // FPA_LOWBIT_ISA=portable|avx2|avx512|neon caps the automatic choice (for comparisons and tests).
  const char* env = std::getenv("FPA_LOWBIT_ISA");
  if (env != nullptr && *env != '\0') {
    for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
      if (std::strcmp(env, isa_name(isa)) == 0 && isa_available(isa)) return isa;
    }
  }
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kNeon}) {
    if (isa_available(isa)) return isa;
  }
  return Isa::kPortable;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAuto: return "auto";
    case Isa::kPortable: return "portable";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kNeon: return "neon";
  }
  return "unknown";
}

enum Code : int {
  kOk = 0,
  kBadBitwidth,
  kBadGroupSize,
  kBadK8,
  kBadKGroup,
  kBadShape,
  kNullPointer,
  kIsaUnavailable,
};

const char* message(int code) {
  switch (code) {
    case kOk: return "ok";
    case kBadBitwidth: return "nbit must be 1..8";
    case kBadGroupSize: return "group_size must be 32, 64, 128 or 256";
    case kBadK8: return "K must be a multiple of 8";
    case kBadKGroup: return "K must be a multiple of group_size";
    case kBadShape: return "M, K and N must be non-negative";
    case kNullPointer: return "a non-empty operand has a null data pointer";
    case kIsaUnavailable: return "the requested instruction-set level is not available on this CPU or in this build";
  }
  return "unknown error";
}

int check_args(const LinearArgs& a) {
  if (a.nbit < 1 || a.nbit > 8) return kBadBitwidth;
  if (a.group_size != 32 && a.group_size != 64 && a.group_size != 128 && a.group_size != 256) return kBadGroupSize;
  if (a.M < 0 || a.K < 0 || a.N < 0) return kBadShape;
  if (a.K % 8 != 0) return kBadK8;
  if (a.K % a.group_size != 0) return kBadKGroup;
  if (a.M > 0 && a.N > 0 &&
      (a.out == nullptr || (a.K > 0 && (a.A == nullptr || a.B == nullptr || a.S == nullptr || a.Z == nullptr))))
    return kNullPointer;
  return kOk;
}

double fma_peak_gflops(Isa isa, int threads, const ParallelFor& parallel_for) {
  if (isa == Isa::kAuto) isa = best_isa();
  if (!isa_available(isa)) return 0.0;
  double (*loop)(int64_t) = detail::portable::fma_flops;
#if defined(__x86_64__) || defined(_M_X64)
  if (isa == Isa::kAvx512) loop = detail::avx512::fma_flops;
  if (isa == Isa::kAvx2) loop = detail::avx2::fma_flops;
#endif
#if defined(__aarch64__)
  if (isa == Isa::kNeon) loop = detail::neon::fma_flops;
#endif
  constexpr int64_t kIterations = 20'000'000;
  loop(kIterations / 20);  // wake the cores up to speed
  std::atomic<double> flops{0.0};
  const auto t0 = std::chrono::steady_clock::now();
  auto task = [&](int64_t) {
    const double f = loop(kIterations);
    double cur = flops.load();
    while (!flops.compare_exchange_weak(cur, cur + f)) {
    }
  };
  if (parallel_for && threads > 1) {
    parallel_for(threads, task);
  } else {
    task(0);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return flops.load() / seconds / 1e9;
}

int linear_f32(const LinearArgs& args, Isa isa, const ParallelFor& parallel_for) {
  if (const int rc = check_args(args); rc != kOk) return rc;
  if (isa == Isa::kAuto) isa = best_isa();
  if (!isa_available(isa)) return kIsaUnavailable;
  if (args.M == 0 || args.N == 0) return kOk;
  if (args.K == 0) {
    if (args.bias == nullptr) {
      std::memset(args.out, 0, static_cast<size_t>(args.M * args.N) * sizeof(float));
    } else {
      for (int64_t m = 0; m < args.M; ++m) std::memcpy(args.out + m * args.N, args.bias, args.N * sizeof(float));
    }
    return kOk;
  }
  ParallelFor serial = [](int64_t n, const std::function<void(int64_t)>& task) {
    for (int64_t i = 0; i < n; ++i) task(i);
  };
  // Below about half a million multiply-adds, waking a second thread costs more than it saves.
  const bool small = static_cast<double>(args.M) * static_cast<double>(args.N) * static_cast<double>(args.K) < 5e5;
  const ParallelFor& pf = (parallel_for && !small) ? parallel_for : serial;
  switch (isa) {
#if defined(__x86_64__) || defined(_M_X64)
    case Isa::kAvx512: detail::avx512::linear(args, pf); break;
    case Isa::kAvx2: detail::avx2::linear(args, pf); break;
#endif
#if defined(__aarch64__)
    case Isa::kNeon: detail::neon::linear(args, pf); break;
#endif
    default: detail::portable::linear(args, pf); break;
  }
  return kOk;
}

}  // namespace fpa_lowbit
