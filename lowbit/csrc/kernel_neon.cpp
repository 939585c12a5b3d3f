// arm64 NEON (Apple silicon, Arm Linux): 32 q registers hold 8 x 2 accumulators.
#if defined(__aarch64__)
#define FPA_LOWBIT_NS neon
#define FPA_LOWBIT_VEC_BYTES 16
#define FPA_LOWBIT_MR 8
#include "kernel_impl.h"
#endif
