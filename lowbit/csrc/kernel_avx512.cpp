// AVX-512F (x86-64): 32 zmm registers hold 12 x 2 accumulators.
// Only this file's own functions get the target (a pragma after the standard headers, not -m flags), so no
// inline function shared with other files is ever emitted with instructions the CPU may lack.
#if defined(__x86_64__) || defined(_M_X64)
#include "kernel_prelude.h"
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#endif
#define FPA_LOWBIT_X86_AVX512 1
#define FPA_LOWBIT_NS avx512
#define FPA_LOWBIT_VEC_BYTES 64
#define FPA_LOWBIT_MR 12
#include "kernel_impl.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
