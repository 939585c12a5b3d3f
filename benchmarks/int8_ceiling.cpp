// The multiply-accumulate ceilings of one x86 core with AVX2: register-only loops of independent chains, no memory
// traffic. They bound what any GEMM can reach on the core:
//   fp32 FMA        vfmadd231ps: 8 MACs per instruction (what XNNPACK's and fpa_lowbit's fp32 GEMMs run on)
//   s16 madd        vpmaddwd + vpaddd on sign-extended int8: 16 MACs per pair (int8 GEMMs that widen to int16)
//   u8 x s8 maddubs vpmaddubsw + vpmaddwd(1) + vpaddd: 32 MACs per triple (int8 GEMMs with 7-bit operands, since
//                   vpmaddubsw saturates pairs of products at int16)
// Build and run (x86-64 with AVX2 + FMA):
//   g++ -O3 -funroll-all-loops benchmarks/int8_ceiling.cpp -o /tmp/int8_ceiling && /tmp/int8_ceiling
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <typename V>
int sink(const V* acc, int n) {  // keeps the chains observable
  int s = 0;
  for (int i = 0; i < n; ++i) {
    int lane;
    std::memcpy(&lane, &acc[i], sizeof lane);
    s += lane;
  }
  return s;
}

__attribute__((target("avx2,fma"))) double fma_gmacs(long iterations) {
  constexpr int kChains = 12;  // covers the FMA latency x throughput
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(1.0f + 1e-3f * static_cast<float>(i));
  const __m256 m = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-7f);
  const auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < iterations; ++k)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, c);
  const double t = seconds_since(t0);
  if (sink(acc, kChains) == 12345) std::puts("");
  return kChains * 8.0 * static_cast<double>(iterations) / t / 1e9;
}

__attribute__((target("avx2,fma"))) double s16_gmacs(long iterations) {
  constexpr int kChains = 8;
  __m256i acc[kChains], b[kChains];
  for (int i = 0; i < kChains; ++i) {
    acc[i] = _mm256_setzero_si256();
    b[i] = _mm256_set1_epi16(static_cast<short>(i + 1));
  }
  __m256i a = _mm256_set1_epi16(3);
  const __m256i one = _mm256_set1_epi16(1);
  const auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < iterations; ++k) {
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(a, b[i]));
    a = _mm256_add_epi16(a, one);
  }
  const double t = seconds_since(t0);
  if (sink(acc, kChains) == 12345) std::puts("");
  return kChains * 16.0 * static_cast<double>(iterations) / t / 1e9;
}

__attribute__((target("avx2,fma"))) double u8s8_gmacs(long iterations) {
  constexpr int kChains = 8;
  __m256i acc[kChains], b[kChains];
  for (int i = 0; i < kChains; ++i) {
    acc[i] = _mm256_setzero_si256();
    b[i] = _mm256_set1_epi8(static_cast<char>(i + 1));
  }
  __m256i a = _mm256_set1_epi8(3);
  const __m256i ones = _mm256_set1_epi16(1);
  const auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < iterations; ++k) {
    for (int i = 0; i < kChains; ++i)
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b[i]), ones));
    a = _mm256_add_epi8(a, ones);
  }
  const double t = seconds_since(t0);
  if (sink(acc, kChains) == 12345) std::puts("");
  return kChains * 32.0 * static_cast<double>(iterations) / t / 1e9;
}

}  // namespace

int main() {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::fprintf(stderr, "int8_ceiling: this CPU has no AVX2 + FMA; nothing to measure\n");
    return 1;
  }
  constexpr long kIterations = 200'000'000;
  fma_gmacs(kIterations / 10);  // wake the core up to speed
  const double fma = fma_gmacs(kIterations), s16 = s16_gmacs(kIterations), u8s8 = u8s8_gmacs(kIterations);
  std::printf("one core, GMAC/s (x fp32 FMA)\n");
  std::printf("fp32 FMA         %6.1f (1.00x)\n", fma);
  std::printf("s16 madd         %6.1f (%.2fx)\n", s16, s16 / fma);
  std::printf("u8 x s8 maddubs  %6.1f (%.2fx)\n", u8s8, u8s8 / fma);
  return 0;
}
