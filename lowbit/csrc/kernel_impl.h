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
constexpr int VL = VB / 4;         // floats per vector
constexpr int MR = FPA_LOWBIT_MR;  // activation rows per tile
#ifndef FPA_LOWBIT_NV
#define FPA_LOWBIT_NV 2
#endif
constexpr int NV = FPA_LOWBIT_NV;  // vectors of accumulators per activation row
constexpr int NR = NV * VL;        // weight rows per tile
constexpr int64_t KC = 512;        // K per expanded panel (a multiple of every group size; measured best of 128-768)
constexpr int64_t GEMV_ROWS = 64;  // weight rows per GEMV task

typedef float vf __attribute__((vector_size(VB)));
typedef int32_t vi __attribute__((vector_size(VB)));
typedef uint8_t vb __attribute__((vector_size(VL)));

inline vf loadu(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void storeu(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
// Broadcast. x - 0 is x for every x (x + 0 is not, for x = -0), so compilers fold it to one broadcast; a
// lane-by-lane loop is not recognised, and vf{} + x costs an add before every broadcast.
inline vf splat(float x) { return x - vf{}; }
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

// The lanes' sum by halving (log2 VL dependent adds rather than VL): at M = 1 and K of a few hundred it ends every
// output row, and a lane-by-lane chain cost as much as the row's products.
inline float hsum(vf v) {
  float t[VL];
  storeu(t, v);
  for (int w = VL / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) t[i] += t[i + w];
  return t[0];
}

struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], AlignedFree>;
inline Buffer alloc(int64_t n) {
  const size_t bytes = ((static_cast<size_t>(n) * sizeof(float) + 63) / 64) * 64;
  return Buffer(static_cast<float*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes)));
}

// Per-thread scratch that only grows, one buffer per slot (kActivations: the calling thread's repacked or transposed
// activations; kPanels: each worker's expanded weight panels). Allocating them per call cost more than the
// products: buffers past glibc's mmap threshold come back as fresh pages, and their page faults took a quarter
// of a 125 x 256 x 4096 product.
enum Slot : int { kActivations = 0, kPanels = 1 };
inline float* scratch(Slot slot, int64_t n) {
  static thread_local Buffer buf[2];
  static thread_local int64_t cap[2] = {0, 0};
  if (n > cap[slot]) {
    buf[slot] = alloc(n);
    cap[slot] = n;
  }
  return buf[slot].get();
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

// 4- or 8-bit, a full strip of NR rows: PER = 32 / NBIT K positions of VL rows at a time. One 32-bit word per row
// holds PER values (q[k + j] in bits NBIT*j .. NBIT*j + NBIT - 1); the words of VL rows form one integer vector, and
// each position becomes one vector of dequantized weights stored straight into the panel's row for that k. Replaces
// two scalar passes per weight (unpack, then dequantize into a strided column), which cost as much as the products
// at M ~ 100 (4-bit) and made the 8-bit GEMM half as fast as fp32.
template <int NBIT>
inline void expand_panel_words(const LinearArgs& a, int64_t r0, int64_t k0, int64_t kc, float* wp) {
  static_assert(NBIT == 4 || NBIT == 8, "whole values per byte, and a group is whole words");
  constexpr int PER = 32 / NBIT;
  constexpr int32_t MASK = (1 << NBIT) - 1;
  const int64_t G = a.K / a.group_size, row_bytes = a.K * NBIT / 8;
  for (int h = 0; h < NR / VL; ++h) {
    const int64_t rb = r0 + h * VL;
    const uint8_t* base = a.B + rb * row_bytes + k0 * NBIT / 8;
    for (int64_t g0 = 0; g0 < kc; g0 += a.group_size) {
      const int64_t g = (k0 + g0) / a.group_size;
      vf s, z;
      for (int i = 0; i < VL; ++i) {
        s[i] = a.S[(rb + i) * G + g];
        z[i] = a.Z[(rb + i) * G + g];
      }
      for (int64_t k = g0; k < g0 + a.group_size; k += PER) {
        vi v;
        for (int i = 0; i < VL; ++i) {
          int32_t word;
          std::memcpy(&word, base + i * row_bytes + k * NBIT / 8, 4);
          v[i] = word;
        }
        for (int j = 0; j < PER; ++j)
          storeu(wp + (k + j) * NR + h * VL, __builtin_convertvector((v >> (NBIT * j)) & MASK, vf) * s + z);
      }
    }
  }
}

// Expand weight rows [r0, r0 + nr) x K range [k0, k0 + kc) into the panel wp[kc][NR] (rows past nr are zero).
template <int NBIT>
void expand_panel(const LinearArgs& a, int64_t r0, int nr, int64_t k0, int64_t kc, float* row, float* wp) {
  if constexpr (NBIT == 4 || NBIT == 8) {
    if (nr == NR) return expand_panel_words<NBIT>(a, r0, k0, kc, wp);
  }
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

// The K block [k0, k0 + kc) of A [M, K] repacked into micro-panels of MR rows, k-major
// (ap[(p * KC + k) * MR + i] = A[p * MR + i, k0 + k], zero past M), so the micro-kernel's broadcasts read one
// contiguous stream (rows of A K floats apart alias in L1 when K is a power of two). One block at a time keeps the
// scratch at M x KC floats.
inline void pack_a(const LinearArgs& a, int64_t k0, int64_t kc, float* ap, int64_t panels,
                   const ParallelFor& parallel_for) {
  parallel_for(panels, [&](int64_t p) {
    const int rows = static_cast<int>(std::min<int64_t>(MR, a.M - p * MR));
    float* dst = ap + p * KC * MR;
    const float* src = a.A + p * MR * a.K + k0;
    if (rows == MR) {
      // k outer: contiguous stores, MR sequential read streams (a store every 4 bytes at a stride of MR floats
      // was 7 % of a 750 x 4096 x 1024 product).
      for (int64_t k = 0; k < kc; ++k)
        for (int i = 0; i < MR; ++i) dst[k * MR + i] = src[i * a.K + k];
    } else {
      for (int64_t k = 0; k < kc; ++k)
        for (int i = 0; i < MR; ++i) dst[k * MR + i] = i < rows ? src[i * a.K + k] : 0.f;
    }
  });
}

// C[0:R, 0:nr] (+)= Ap[0:kc, 0:R]^T @ panel[0:kc, 0:nr] (+ bias[0:nr] when bias is given: the last K block) over
// a packed micro-panel of A (MR floats per k, of which the first R rows are computed); accumulate adds to what C
// holds. R = MR for every full micro-panel; the last one of an M that is not a multiple of MR computes only its
// R valid rows (at the encoder's M = 125 a padded 12-row tile was 5 % of the multiply-adds). Each row's products
// are the same operations in the same order whatever R is, so the bits do not depend on it.
template <int R>
void micro(const float* ap, const float* wp, int64_t kc, float* C, int64_t ldc, bool accumulate, int nr,
           const float* bias) {
  vf c[R][NV];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < NV; ++v) c[i][v] = vf{};
  for (int64_t k = 0; k < kc; ++k) {
    vf w[NV];
    for (int v = 0; v < NV; ++v) w[v] = loadu(wp + k * NR + v * VL);
    const float* ak = ap + k * MR;
    for (int i = 0; i < R; ++i) {
      const vf av = splat(ak[i]);
      for (int v = 0; v < NV; ++v) c[i][v] += av * w[v];
    }
  }
  if (nr == NR) {
    for (int i = 0; i < R; ++i) {
      float* ci = C + i * ldc;
      for (int v = 0; v < NV; ++v) {
        if (accumulate) c[i][v] += loadu(ci + v * VL);
        if (bias != nullptr) c[i][v] += loadu(bias + v * VL);
        storeu(ci + v * VL, c[i][v]);
      }
    }
  } else {
    float t[NR];
    for (int i = 0; i < R; ++i) {
      for (int v = 0; v < NV; ++v) storeu(t + v * VL, c[i][v]);
      float* ci = C + i * ldc;
      for (int j = 0; j < nr; ++j) {
        const float x = accumulate ? ci[j] + t[j] : t[j];
        ci[j] = bias != nullptr ? x + bias[j] : x;
      }
    }
  }
}

// micro<R> for R = 1..MR, indexed by R - 1.
using MicroFn = void (*)(const float*, const float*, int64_t, float*, int64_t, bool, int, const float*);
template <int... I>
constexpr std::array<MicroFn, sizeof...(I)> micro_table(std::integer_sequence<int, I...>) {
  return {&micro<I + 1>...};
}
constexpr std::array<MicroFn, MR> kMicro = micro_table(std::make_integer_sequence<int, MR>{});

// Weight rows per task: enough tasks to keep a few threads busy, at most NB_MAX rows (their expanded panels,
// NB_MAX * KC floats, stay in L2 while every micro-panel of A passes over them).
constexpr int64_t NB_MAX = 256;
// Micro-panels of A per chunk that stays in L2 (PB x MR x KC floats: 192 KB at MR = 12).
constexpr int64_t PB = 8;
inline int64_t rows_per_task(int64_t N) {
  const int64_t want = (N / 8 + NR - 1) / NR * NR;
  return std::max<int64_t>(NR, std::min<int64_t>(NB_MAX, want));
}

template <int NBIT>
void gemm(const LinearArgs& a, const ParallelFor& parallel_for) {
  const int64_t panels = (a.M + MR - 1) / MR;
  const int64_t kblocks = (a.K + KC - 1) / KC;
  float* ap = scratch(kActivations, panels * KC * MR);
  const int64_t nb = rows_per_task(a.N);
  const int64_t n_tasks = (a.N + nb - 1) / nb;
  const int64_t strips_max = (nb + NR - 1) / NR;
  // One pass per K block, all threads on the same block of A (M x KC, shared in the last-level cache) rather than
  // each task sweeping all of A: for M x K past the cache that is the difference between one and N / nb reads.
  for (int64_t kb = 0; kb < kblocks; ++kb) {
    const int64_t k0 = kb * KC, kc = std::min(KC, a.K - k0);
    pack_a(a, k0, kc, ap, panels, parallel_for);
    parallel_for(n_tasks, [&](int64_t t) {
      const int64_t r_begin = t * nb, r_end = std::min(a.N, r_begin + nb);
      const int64_t strips = (r_end - r_begin + NR - 1) / NR;
      // A task's panels are expanded and used within this call of the task, so one buffer per thread will do.
      float* wp = scratch(kPanels, strips_max * KC * NR + KC);
      float* row = wp + strips_max * KC * NR;
      for (int64_t s = 0; s < strips; ++s) {
        const int64_t r = r_begin + s * NR;
        expand_panel<NBIT>(a, r, static_cast<int>(std::min<int64_t>(NR, r_end - r)), k0, kc, row, wp + s * KC * NR);
      }
      // A chunk of PB micro-panels of A (PB x MR x KC floats) stays in L2 while the chunk's micro-panels stream
      // past each strip's panel (KC x NR floats): without the chunks, the whole block of A (M x KC) came from the
      // last-level cache once per strip, which at M = 3000 cost a sixth of the time.
      for (int64_t p0 = 0; p0 < panels; p0 += PB) {
        const int64_t p1 = std::min(panels, p0 + PB);
        for (int64_t s = 0; s < strips; ++s) {
          const int64_t r = r_begin + s * NR;
          const int nr = static_cast<int>(std::min<int64_t>(NR, r_end - r));
          for (int64_t p = p0; p < p1; ++p) {
            const int rows = static_cast<int>(std::min<int64_t>(MR, a.M - p * MR));
            const float* bias = a.bias != nullptr && kb == kblocks - 1 ? a.bias + r : nullptr;
            float* c = a.out + p * MR * a.N + r;
            if (rows == MR) {
              micro<MR>(ap + p * KC * MR, wp + s * KC * NR, kc, c, a.N, kb > 0, nr, bias);
            } else {
              kMicro[rows - 1](ap + p * KC * MR, wp + s * KC * NR, kc, c, a.N, kb > 0, nr, bias);
            }
          }
        }
      }
    });
  }
}

// RB weight rows go together in the GEMVs below.
constexpr int RB = 4;

// The end of a GEMV over `rows` weight rows: y[i] = the sum of row i's scaled group products (total[i]) plus its
// zero-point term, sum_g Z[r + i, g] * sum(a[g]) (as: the activation row's group sums).
template <int rows>
inline void finish_rows(const LinearArgs& a, int64_t r, int64_t G, const vf* total, const float* as, float* y) {
  for (int i = 0; i < rows; ++i) {
    const float* zr = a.Z + (r + i) * G;
    vf zacc = vf{};
    int64_t g = 0;
    for (; g + VL <= G; g += VL) zacc += loadu(zr + g) * loadu(as + g);
    float v = hsum(total[i] + zacc);
    for (; g < G; ++g) v += zr[g] * as[g];
    y[i] = v;
  }
}

// What both GEMVs share: each activation row laid out once per call by `layout(a_row, x_row)` into floats_per_row
// floats, plus its group sums; then tasks of GEMV_ROWS weight rows, RB at a time, through
// `rows_fn(std::integral_constant<int, n>, r, x_row, sums, y)`, stored with the bias.
template <int GS, typename Layout, typename RowsFn>
void gemv4_frame(const LinearArgs& a, const ParallelFor& parallel_for, int64_t floats_per_row, Layout layout,
                 RowsFn rows_fn) {
  const int64_t K = a.K, G = K / GS;
  float* x = scratch(kActivations, a.M * (floats_per_row + G));
  float* asum = x + a.M * floats_per_row;
  for (int64_t m = 0; m < a.M; ++m) {
    const float* am = a.A + m * K;
    layout(am, x + m * floats_per_row);
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
      const float* xm = x + m * floats_per_row;
      const float* as = asum + m * G;
      float* out = a.out + m * a.N;
      int64_t r = t * GEMV_ROWS;
      for (; r + RB <= r_end; r += RB) {
        float y[RB];
        rows_fn(std::integral_constant<int, RB>{}, r, xm, as, y);
        for (int i = 0; i < RB; ++i) out[r + i] = a.bias != nullptr ? y[i] + a.bias[r + i] : y[i];
      }
      for (; r < r_end; ++r) {
        float y[1];
        rows_fn(std::integral_constant<int, 1>{}, r, xm, as, y);
        out[r] = a.bias != nullptr ? y[0] + a.bias[r] : y[0];
      }
    }
  };
  parallel_for(n_tasks, task);
}

// 4-bit, few activation rows, y[m, r] = sum_g S[r,g] * dot(q[r, g], a[m, g]) + Z[r,g] * sum(a[m, g]), over bytes
// (every level but AVX-512).
// Byte j of a row holds q[2j] (low nibble) and q[2j+1] (high nibble), so the activations are split once into
// even and odd positions and each byte vector multiplies both halves without re-interleaving. RB weight rows go
// together (independent accumulator chains, shared activation loads); the group size is a template argument so
// the loop over one group unrolls completely.
template <int GS, int rows>
inline void gemv4_rows_bytes(const LinearArgs& a, int64_t r, const float* xe, const float* xo, const float* as,
                             float* y) {
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
  finish_rows<rows>(a, r, G, total, as, y);
}

template <int GS>
void gemv4_bytes(const LinearArgs& a, const ParallelFor& parallel_for) {
  const int64_t row_bytes = a.K / 2;
  gemv4_frame<GS>(
      a, parallel_for, 2 * row_bytes,
      [&](const float* am, float* x) {  // x[0, row_bytes): even positions; x[row_bytes, 2 row_bytes): odd ones
        for (int64_t j = 0; j < row_bytes; ++j) {
          x[j] = am[2 * j];
          x[row_bytes + j] = am[2 * j + 1];
        }
      },
      [&](auto rows, int64_t r, const float* x, const float* as, float* y) {
        gemv4_rows_bytes<GS, decltype(rows)::value>(a, r, x, x + row_bytes, as, y);
      });
}

#if defined(FPA_LOWBIT_X86_AVX512)
// The same over 32-bit words, for AVX-512 (with 16 registers, AVX2 spills its accumulators and ran this at half the
// speed of the byte version). The weight is never expanded. A row's packed bytes are read as 32-bit words: word d
// holds q[8d .. 8d+7] (nibble j is q[8d + j]), so VL words loaded as one integer vector are VL lanes x 8 nibble
// positions, and nibble j of every lane is one shift away (no widening of bytes). The activations are transposed once
// per call to xt[j][d] = a[8d + j], so nibble position j multiplies one contiguous vector. The lanes of one block
// belong to VL * 8 / group_size groups (or one group spans several blocks): the block's products are scaled once by a
// vector holding each lane's group scale. RB weight rows go together (independent accumulator chains, shared
// activation loads). Per 8 * VL weights: 7 shifts, 8 permutes and 8 FMAs, against 4 widenings, 4 masks, 4 shifts, 8
// conversions and 8 FMAs over bytes. K must be a multiple of 8 * VL (128); other K take the byte version.

// The float value of each lane's low nibble: vpermps reads only the low 4 bits of each index, so one instruction
// replaces a mask and a conversion.
inline vf nibble(vi v) {
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 r = _mm512_permutexvar_ps(reinterpret_cast<__m512i>(v), iota);
  vf out;
  std::memcpy(&out, &r, sizeof out);
  return out;
}

// Lane l of the result is s[l / LPG] (LPG lanes per group, LPG < VL).
template <int LPG>
inline vf spread(const float* s) {
  static_assert(LPG < VL, "a group that fills the block is a broadcast");
  const __mmask16 mask = static_cast<__mmask16>((1u << (VL / LPG)) - 1u);  // masked-off lanes are never read
  const __m512 loaded = _mm512_maskz_loadu_ps(mask, s);
  const __m512i idx = LPG == 4 ? _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)
                               : _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m512 r = _mm512_permutexvar_ps(idx, loaded);
  vf out;
  std::memcpy(&out, &r, sizeof out);
  return out;
}

template <int GS, int rows>
inline void gemv4_rows_words(const LinearArgs& a, int64_t r, const float* xt, const float* as, float* y) {
  constexpr int LPG = GS / 8;  // lanes (words) per group
  const int64_t G = a.K / GS, row_bytes = a.K / 2, kd = a.K / 8;
  const int64_t blocks = kd / VL;
  vf total[rows];
  for (int i = 0; i < rows; ++i) total[i] = vf{};
  for (int64_t b = 0; b < blocks; ++b) {
    vi v[rows];
    for (int i = 0; i < rows; ++i) std::memcpy(&v[i], a.B + (r + i) * row_bytes + b * VB, sizeof(vi));
    vf acc[rows];
    {
      const vf x0 = loadu(xt + b * VL);
      for (int i = 0; i < rows; ++i) acc[i] = nibble(v[i]) * x0;
    }
    for (int j = 1; j < 8; ++j) {
      const vf xj = loadu(xt + j * kd + b * VL);
      for (int i = 0; i < rows; ++i) acc[i] += nibble(v[i] >> (4 * j)) * xj;
    }
    for (int i = 0; i < rows; ++i) {
      const float* s = a.S + (r + i) * G;
      if constexpr (LPG < VL) {
        total[i] += acc[i] * spread<LPG>(s + b * VL / LPG);
      } else {
        total[i] += acc[i] * splat(s[b * VL / LPG]);
      }
    }
  }
  finish_rows<rows>(a, r, G, total, as, y);
}

template <int GS>
void gemv4_words(const LinearArgs& a, const ParallelFor& parallel_for) {
  const int64_t kd = a.K / 8;  // words per row, the stride of one nibble position
  gemv4_frame<GS>(
      a, parallel_for, 8 * kd,
      [&](const float* am, float* x) {
        for (int64_t d = 0; d < kd; ++d)
          for (int j = 0; j < 8; ++j) x[j * kd + d] = am[8 * d + j];
      },
      [&](auto rows, int64_t r, const float* x, const float* as, float* y) {
        gemv4_rows_words<GS, decltype(rows)::value>(a, r, x, as, y);
      });
}
#endif  // FPA_LOWBIT_X86_AVX512

// 8-bit, few activation rows: y[m, r] = sum_g S[r,g] * dot(q[r, g], a[m, g]) + Z[r,g] * sum(a[m, g]). Bytes are
// widened VL at a time straight against the activation row (no layout); each group's products are scaled once. The
// weight is read once per activation row, 1 byte per value plus the group's scale and zero, against 4 bytes per
// value for a float weight: at M = 1 (a decoder or joint step) the product is bound by those reads.
// Weight rows ahead whose bytes the 8-bit GEMV prefetches (one thread: 0.35 -> 0.30 ms at 1 x 640 x 8198). A
// prefetch past the weight's end is a hint, never a fault.
constexpr int64_t PF_ROWS = 8;
template <int GS, int rows>
inline void gemv8_rows(const LinearArgs& a, int64_t r, const float* x, const float* as, float* y) {
  static_assert(GS % (2 * VL) == 0, "a group is whole pairs of vectors");
  const int64_t G = a.K / GS;
  vf total[rows];
  for (int i = 0; i < rows; ++i) total[i] = vf{};
  for (int64_t g = 0; g < G; ++g) {
    // Two accumulator chains per row: with `rows` chains alone the FMA latency, not the reads, set the pace.
    vf acc[2][rows];
    for (int i = 0; i < rows; ++i) acc[0][i] = acc[1][i] = vf{};
    for (int64_t j = g * GS; j < (g + 1) * GS; j += 2 * VL) {
      for (int i = 0; i < rows; ++i) __builtin_prefetch(a.B + (r + i + PF_ROWS) * a.K + j);
      for (int h = 0; h < 2; ++h) {
        const vf xv = loadu(x + j + h * VL);
        for (int i = 0; i < rows; ++i)
          acc[h][i] += __builtin_convertvector(widen(a.B + (r + i) * a.K + j + h * VL), vf) * xv;
      }
    }
    for (int i = 0; i < rows; ++i) total[i] += (acc[0][i] + acc[1][i]) * splat(a.S[(r + i) * G + g]);
  }
  finish_rows<rows>(a, r, G, total, as, y);
}

template <int GS>
void gemv8(const LinearArgs& a, const ParallelFor& parallel_for) {
  gemv4_frame<GS>(
      a, parallel_for, a.K, [&](const float* am, float* x) { std::memcpy(x, am, sizeof(float) * a.K); },
      [&](auto rows, int64_t r, const float* x, const float* as, float* y) {
        gemv8_rows<GS, decltype(rows)::value>(a, r, x, as, y);
      });
}

template <int GS>
void gemv4(const LinearArgs& a, const ParallelFor& parallel_for) {
#if defined(FPA_LOWBIT_X86_AVX512)
  if (a.K % (8 * VL) == 0) return gemv4_words<GS>(a, parallel_for);
#endif
  gemv4_bytes<GS>(a, parallel_for);
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
  if (a.nbit == 8 && a.M <= kGemvMaxRows) {
    switch (a.group_size) {
      case 32: return gemv8<32>(a, parallel_for);
      case 64: return gemv8<64>(a, parallel_for);
      case 128: return gemv8<128>(a, parallel_for);
      default: return gemv8<256>(a, parallel_for);
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
