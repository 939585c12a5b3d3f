#include "cpu_threads.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

#include "errors.h"

#ifdef ET_USE_THREADPOOL
// The pip wheel of ExecuTorch ships its thread pool library (executorch::threadpool, which sets ET_USE_THREADPOOL)
// but not extension/threadpool/threadpool.h. These are the two non-virtual members of its ThreadPool and the
// accessor the runner calls, declared as that header declares them; the class is only ever used through the
// pointer the library returns, so its layout is not needed here.
namespace executorch::extension::threadpool {
class ThreadPool final {
 public:
  size_t get_thread_count() const;
  bool _unsafe_reset_threadpool(uint32_t num_threads);
};
ThreadPool* get_threadpool();
}  // namespace executorch::extension::threadpool
#endif

namespace parakeet {

int cpu_threads() {
#ifdef ET_USE_THREADPOOL
  auto* pool = executorch::extension::threadpool::get_threadpool();
  return pool ? static_cast<int>(pool->get_thread_count()) : 0;
#else
  return 0;
#endif
}

void set_cpu_threads(int threads) {
  if (threads < 1) throw RunnerError("the thread count must be at least 1, not " + std::to_string(threads));
#ifdef ET_USE_THREADPOOL
  auto* pool = executorch::extension::threadpool::get_threadpool();
  if (pool == nullptr) throw RunnerError("ExecuTorch's thread pool could not be created");
  if (static_cast<int>(pool->get_thread_count()) == threads) return;
  if (!pool->_unsafe_reset_threadpool(static_cast<uint32_t>(threads))) {
    throw RunnerError("ExecuTorch's thread pool refused " + std::to_string(threads) + " threads");
  }
#else
  throw RunnerError("this ExecuTorch was built without a thread pool; leave the thread count at its default");
#endif
}

int available_cpus() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

std::string oversubscription_warning(int threads) {
  const int cpus = available_cpus();
  if (threads <= cpus) return "";
  return "--threads " + std::to_string(threads) + " is more than the " + std::to_string(cpus) + " CPU" +
         (cpus != 1 ? "s" : "") + " this process may use; the extra threads only take turns on the same cores " +
         "(slower): use --threads " + std::to_string(cpus) + " or fewer";
}

}  // namespace parakeet
