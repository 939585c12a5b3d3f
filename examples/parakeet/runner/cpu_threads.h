// The number of CPU threads the runner computes on: ExecuTorch's one thread pool, on which the XNNPACK delegates,
// the optimized portable kernels and fpa_lowbit's fpa4w kernels all run. It starts with one thread per core; the
// Python runner sets the same pool (runtime/threads.py).
#pragma once

#include <string>

namespace parakeet {

// The pool's size now, or 0 when this ExecuTorch was built without a thread pool.
int cpu_threads();

// Resizes the pool to `threads` threads (ExecuTorch's ThreadPool::_unsafe_reset_threadpool). Call it before the
// model runs: resizing while a method runs on the pool is unsafe. Throws RunnerError when `threads` < 1, when this
// ExecuTorch has no thread pool, or when the pool refuses the size.
void set_cpu_threads(int threads);

// CPUs this process may run on (its affinity mask on Linux, else the machine's count).
int available_cpus();

// A one-line warning when `threads` exceeds available_cpus() (the extra threads only take turns on the same cores),
// else "". The same words as the Python runner's (runtime/threads.py).
std::string oversubscription_warning(int threads);

}  // namespace parakeet
