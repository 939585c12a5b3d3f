// The kernels, written once over GCC/Clang vector extensions and compiled once per instruction-set level by
// kernel_<level>.cpp, which defines:
//   FPA_LOWBIT_NS         namespace of this level (portable, avx2, avx512, neon)
//   FPA_LOWBIT_VEC_BYTES  vector register width in bytes (16, 32 or 64)
//   FPA_LOWBIT_MR         activation rows per micro-kernel tile (bounded by the register file)
// and switches on that level's target ISA for what follows. -ffp-contract=fast turns a * b + c into FMA where the level
// has it.
#include "kernel_prelude.h"

namespace fpa_lowbit::detail::FPA_LOWBIT_NS {
namespace {

constexpr int VB = FPA_LOWBIT_VEC_BYTES;
constexpr int VL = VB / 4;                 // floats per vector
constexpr int MR = FPA_LOWBIT_MR;          // activation rows per tile
constexpr int NR = 2 * VL;                 // weight rows per tile (two vectors of accumulators per activation row)
constexpr int64_t KC = 256;                // K per expanded panel (a multiple of every group size)
constexpr int64_t MC = 16 * MR;            // activation rows per pass over one panel (A block stays in L2)
constexpr int64_t NB = NR > 64 ? NR : 64;  // weight rows per task (their panels: NB * KC floats)
constexpr int64_t GEMV_ROWS = 16;          // weight rows per GEMV task

typedef float vf __attribute__((vector_size(VB)));
typedef int32_t vi __attribute__((vector_size(VB)));
typedef uint8_t vb __attribute__((vector_size(VL)));

inline vf loadu(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void storeu(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
inline vf splat(float x) { return vf{} + x; }  // scalar operand: broadcast (a lane-by-lane loop is not recognised)
// VL bytes -> VL int32 lanes. Compilers turn a generic __builtin_convertvector of bytes into lane-by-lane
// scalar code, so each level says how its ISA widens (one or two instructions).
inline vi widen(const uint8_t* p) {
#if defined(FPA_LOWBIT_X86_AVX512)
  const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#elif defined(FPA_LOWBIT_X86_AVX2)
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
#elif (defined(__x86_64__) || defined(_M_X64)) && FPA_LOWBIT_VEC_BYTES == 16
  int32_t word;
  std::memcpy(&word, p, 4);
  const __m128i zero = _mm_setzero_si128();
  const __m128i v = _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(word), zero), zero);
#elif defined(__aarch64__) && FPA_LOWBIT_VEC_BYTES == 16
  uint8_t b8[8] = {p[0], p[1], p[2], p[3], 0, 0, 0, 0};
  const uint32x4_t v = vmovl_u16(vget_low_u16(vmovl_u8(vld1_u8(b8))));
#else
  vb bytes;
  std::memcpy(&bytes, p, sizeof bytes);
  const vi v = __builtin_convertvector(bytes, vi);
#endif
  vi out;
  std::memcpy(&out, &v, sizeof out);
  return out;
}

inline float hsum(vf v) {
  float s = 0.f;
  for (int i = 0; i < VL; ++i) s += v[i];
  return s;
}

struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], AlignedFree>;
inline Buffer alloc(int64_t n) {
  const size_t bytes = ((static_cast<size_t>(n) * sizeof(float) + 63) / 64) * 64;
  return Buffer(static_cast<float*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes)));
}

// K n-bit values of one row (LSB-first stream starting at a byte boundary) as floats.
template <int NBIT>
inline void unpack(const uint8_t* src, int64_t k, float* dst) {
  if constexpr (NBIT == 8) {
    for (int64_t i = 0; i < k; ++i) dst[i] = static_cast<float>(src[i]);
  } else if constexpr (8 % NBIT == 0) {
    constexpr int per_byte = 8 / NBIT;
    constexpr uint32_t mask = (1u << NBIT) - 1u;
    for (int64_t b = 0; b < k / per_byte; ++b) {
      const uint32_t v = src[b];
      for (int i = 0; i < per_byte; ++i) dst[b * per_byte + i] = static_cast<float>((v >> (i * NBIT)) & mask);
    }
  } else {
    // 3, 5, 6, 7 bits: 8 values in NBIT bytes, read as one little-endian word.
    constexpr uint64_t mask = (1ull << NBIT) - 1ull;
    for (int64_t u = 0; u < k / 8; ++u) {
      uint64_t w = 0;
      for (int b = 0; b < NBIT; ++b) w |= static_cast<uint64_t>(src[u * NBIT + b]) << (8 * b);
      for (int i = 0; i < 8; ++i) dst[u * 8 + i] = static_cast<float>((w >> (i * NBIT)) & mask);
    }
  }
}

// Expand weight rows [r0, r0 + nr) x K range [k0, k0 + kc) into the panel wp[kc][NR] (rows past nr are zero).
template <int NBIT>
void expand_panel(const LinearArgs& a, int64_t r0, int nr, int64_t k0, int64_t kc, float* row, float* wp) {
  const int64_t G = a.K / a.group_size;
  const int64_t row_bytes = a.K * NBIT / 8;
  for (int r = 0; r < nr; ++r) {
    unpack<NBIT>(a.B + (r0 + r) * row_bytes + k0 * NBIT / 8, kc, row);
    for (int64_t g0 = 0; g0 < kc; g0 += a.group_size) {
      const int64_t g = (k0 + g0) / a.group_size;
      const float s = a.S[(r0 + r) * G + g], z = a.Z[(r0 + r) * G + g];
      for (int64_t k = g0; k < g0 + a.group_size; ++k) wp[k * NR + r] = row[k] * s + z;
    }
  }
  for (int r = nr; r < NR; ++r)
    for (int64_t k = 0; k < kc; ++k) wp[k * NR + r] = 0.f;
}

// C[0:mr, 0:nr] (+)= A[0:mr, 0:kc] @ panel[0:kc, 0:nr]; accumulate adds to what C holds.
template <int mr>
inline void micro(const float* A, int64_t lda, const float* wp, int64_t kc, float* C, int64_t ldc, bool accumulate,
                  int nr) {
  vf c0[mr], c1[mr];
  for (int i = 0; i < mr; ++i) c0[i] = c1[i] = vf{};
  for (int64_t k = 0; k < kc; ++k) {
    const vf w0 = loadu(wp + k * NR), w1 = loadu(wp + k * NR + VL);
    for (int i = 0; i < mr; ++i) {
      const vf av = splat(A[i * lda + k]);
      c0[i] += av * w0;
      c1[i] += av * w1;
    }
  }
  if (nr == NR) {
    for (int i = 0; i < mr; ++i) {
      float* c = C + i * ldc;
      if (accumulate) {
        c0[i] += loadu(c);
        c1[i] += loadu(c + VL);
      }
      storeu(c, c0[i]);
      storeu(c + VL, c1[i]);
    }
  } else {
    float t[NR];
    for (int i = 0; i < mr; ++i) {
      storeu(t, c0[i]);
      storeu(t + VL, c1[i]);
      float* c = C + i * ldc;
      for (int j = 0; j < nr; ++j) c[j] = accumulate ? c[j] + t[j] : t[j];
    }
  }
}

template <int mr>
inline void micro_rows(int rows, const float* A, int64_t lda, const float* wp, int64_t kc, float* C, int64_t ldc,
                       bool accumulate, int nr) {
  if constexpr (mr > 0) {
    if (rows == mr) {
      micro<mr>(A, lda, wp, kc, C, ldc, accumulate, nr);
    } else {
      micro_rows<mr - 1>(rows, A, lda, wp, kc, C, ldc, accumulate, nr);
    }
  }
}

template <int NBIT>
void gemm(const LinearArgs& a, const ParallelFor& parallel_for) {
  const int64_t n_tasks = (a.N + NB - 1) / NB;
  auto task = [&](int64_t t) {
    const int64_t r_begin = t * NB, r_end = std::min(a.N, r_begin + NB);
    const int64_t strips = (r_end - r_begin + NR - 1) / NR;
    Buffer panels = alloc(strips * KC * NR);
    Buffer row = alloc(KC);
    for (int64_t k0 = 0; k0 < a.K; k0 += KC) {
      const int64_t kc = std::min(KC, a.K - k0);
      for (int64_t s = 0; s < strips; ++s) {
        const int64_t r = r_begin + s * NR;
        expand_panel<NBIT>(a, r, static_cast<int>(std::min<int64_t>(NR, r_end - r)), k0, kc, row.get(),
                           panels.get() + s * KC * NR);
      }
      for (int64_t m0 = 0; m0 < a.M; m0 += MC) {
        const int64_t m1 = std::min(a.M, m0 + MC);
        for (int64_t s = 0; s < strips; ++s) {
          const int64_t r = r_begin + s * NR;
          const int nr = static_cast<int>(std::min<int64_t>(NR, r_end - r));
          for (int64_t m = m0; m < m1; m += MR) {
            const int rows = static_cast<int>(std::min<int64_t>(MR, m1 - m));
            micro_rows<MR>(rows, a.A + m * a.K + k0, a.K, panels.get() + s * KC * NR, kc, a.out + m * a.N + r, a.N,
                           k0 > 0, nr);
          }
        }
      }
    }
  };
  parallel_for(n_tasks, task);
}

// 4-bit, few activation rows: y[m, r] = sum_g S[r,g] * dot(q[r, g], a[m, g]) + Z[r,g] * sum(a[m, g]).
// Byte j of a row holds q[2j] (low nibble) and q[2j+1] (high nibble), so the activations are split once into
// even and odd positions and each byte vector multiplies both halves without re-interleaving. RB weight rows go
// together (independent accumulator chains, shared activation loads); the group size is a template argument so
// the loop over one group unrolls completely.
constexpr int RB = 4;

template <int GS, int rows>
inline void gemv4_rows(const LinearArgs& a, int64_t r, const float* xe, const float* xo, const float* as, float* y) {
  constexpr int64_t HALF = GS / 2;
  const int64_t G = a.K / GS, row_bytes = a.K / 2;
  vf total[rows];
  for (int i = 0; i < rows; ++i) total[i] = vf{};
  for (int64_t g = 0; g < G; ++g) {
    vf acc[rows];
    for (int i = 0; i < rows; ++i) acc[i] = vf{};
    for (int64_t j = g * HALF; j < (g + 1) * HALF; j += VL) {
      const vf e = loadu(xe + j), o = loadu(xo + j);
      for (int i = 0; i < rows; ++i) {
        const vi v = widen(a.B + (r + i) * row_bytes + j);
        acc[i] += __builtin_convertvector(v & 15, vf) * e;
        acc[i] += __builtin_convertvector(v >> 4, vf) * o;
      }
    }
    for (int i = 0; i < rows; ++i) total[i] += acc[i] * splat(a.S[(r + i) * G + g]);
  }
  for (int i = 0; i < rows; ++i) {
    const float* zr = a.Z + (r + i) * G;
    vf zacc = vf{};
    int64_t g = 0;
    for (; g + VL <= G; g += VL) zacc += loadu(zr + g) * loadu(as + g);
    float v = hsum(total[i]) + hsum(zacc);
    for (; g < G; ++g) v += zr[g] * as[g];
    y[i] = v;
  }
}

template <int GS>
void gemv4(const LinearArgs& a, const ParallelFor& parallel_for) {
  const int64_t K = a.K, G = K / GS, row_bytes = K / 2;
  Buffer even = alloc(a.M * row_bytes), odd = alloc(a.M * row_bytes), asum = alloc(a.M * G);
  for (int64_t m = 0; m < a.M; ++m) {
    const float* am = a.A + m * K;
    for (int64_t j = 0; j < row_bytes; ++j) {
      even[m * row_bytes + j] = am[2 * j];
      odd[m * row_bytes + j] = am[2 * j + 1];
    }
    for (int64_t g = 0; g < G; ++g) {
      float s = 0.f;
      for (int64_t k = 0; k < GS; ++k) s += am[g * GS + k];
      asum[m * G + g] = s;
    }
  }
  const int64_t n_tasks = (a.N + GEMV_ROWS - 1) / GEMV_ROWS;
  auto task = [&](int64_t t) {
    const int64_t r_end = std::min(a.N, (t + 1) * GEMV_ROWS);
    for (int64_t m = 0; m < a.M; ++m) {
      const float* xe = even.get() + m * row_bytes;
      const float* xo = odd.get() + m * row_bytes;
      const float* as = asum.get() + m * G;
      int64_t r = t * GEMV_ROWS;
      for (; r + RB <= r_end; r += RB) {
        float y[RB];
        gemv4_rows<GS, RB>(a, r, xe, xo, as, y);
        for (int i = 0; i < RB; ++i) a.out[m * a.N + r + i] = y[i];
      }
      for (; r < r_end; ++r) {
        float y[1];
        gemv4_rows<GS, 1>(a, r, xe, xo, as, y);
        a.out[m * a.N + r] = y[0];
      }
    }
  };
  parallel_for(n_tasks, task);
}

}  // namespace

double fma_flops(int64_t iterations) {
  // 12 independent accumulators cover the FMA latency x throughput of every level's cores; the result is kept
  // observable so the loop is not removed.
  constexpr int CHAINS = 12;
  vf acc[CHAINS];
  for (int i = 0; i < CHAINS; ++i) acc[i] = splat(1.0f + 1e-3f * static_cast<float>(i));
  const vf mul = splat(0.999999f), add = splat(1e-7f);
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < CHAINS; ++i) acc[i] = acc[i] * mul + add;
  float sink = 0.f;
  for (int i = 0; i < CHAINS; ++i) sink += hsum(acc[i]);
  volatile float keep = sink;
  (void)keep;
  return 2.0 * CHAINS * VL * static_cast<double>(iterations);
}

void linear(const LinearArgs& a, const ParallelFor& parallel_for) {
  if (a.nbit == 4 && a.M <= kGemvMaxRows) {
    switch (a.group_size) {
      case 32: return gemv4<32>(a, parallel_for);
      case 64: return gemv4<64>(a, parallel_for);
      case 128: return gemv4<128>(a, parallel_for);
      default: return gemv4<256>(a, parallel_for);
    }
  }
  switch (a.nbit) {
    case 1: return gemm<1>(a, parallel_for);
    case 2: return gemm<2>(a, parallel_for);
    case 3: return gemm<3>(a, parallel_for);
    case 4: return gemm<4>(a, parallel_for);
    case 5: return gemm<5>(a, parallel_for);
    case 6: return gemm<6>(a, parallel_for);
    case 7: return gemm<7>(a, parallel_for);
    default: return gemm<8>(a, parallel_for);
  }
}

}  // namespace fpa_lowbit::detail::FPA_LOWBIT_NS
