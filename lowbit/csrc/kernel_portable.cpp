// The portable level: 16-byte vectors (SSE2 on x86-64, NEON on arm64, plain C++ elsewhere).
#define FPA_LOWBIT_NS portable
#define FPA_LOWBIT_VEC_BYTES 16
#define FPA_LOWBIT_MR 6
#include "kernel_impl.h"
