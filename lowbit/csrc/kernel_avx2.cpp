// AVX2 + FMA (x86-64): 16 ymm registers hold 6 x 2 accumulators, two weight vectors and a broadcast.
// Only this file's own functions get the target (a pragma after the standard headers, not -m flags), so no
// inline function shared with other files is ever emitted with instructions the CPU may lack.
#if defined(__x86_64__) || defined(_M_X64)
#include "kernel_prelude.h"
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
#define FPA_LOWBIT_X86_AVX2 1
#define FPA_LOWBIT_NS avx2
#define FPA_LOWBIT_VEC_BYTES 32
#define FPA_LOWBIT_MR 6
#include "kernel_impl.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
