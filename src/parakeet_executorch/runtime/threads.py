"""The number of CPU threads a transcription runs on.

Every CPU method of a .pte runs on ExecuTorch's one thread pool: the XNNPACK delegates, the optimized portable
kernels and fpa_lowbit's fpa4w kernels. The pool starts with one thread per core
of the machine. The C++ runner sets the same pool (``runner/cpu_threads.cpp``).

There is one pool per process, whichever runtime created it (ExecuTorch's Python bindings and the native runtime
load the same ``libexecutorch_threadpool``). Where the native runtime is installed it sets the pool, so that this
module does not import the bindings, and with them torch (``runtime``: as ``pte_runtime.RUNTIMES``; pass the
runtime the process runs its .pte on, so that it does not load the other one).
"""

from __future__ import annotations

import os

from . import native_pte_model
from .runtime_log import captured_runtime_log

# More threads than this is a typo, not a machine: each one is an OS thread the pool starts at once.
MAX_THREADS = 1024


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no sched_getaffinity
        return os.cpu_count() or 1


def oversubscription_warning(threads: int) -> str | None:
    """A one-line warning when ``threads`` exceeds the CPUs this process may use (threads beyond them take turns
    on the same cores: 1000 threads on 2 cores made a clip's encoder 15x slower), else None."""
    cpus = available_cpus()
    if threads <= cpus:
        return None
    return (
        f"--threads {threads} is more than the {cpus} CPU{'s' if cpus != 1 else ''} this process may use; the extra "
        f"threads only take turns on the same cores (slower): use --threads {cpus} or fewer"
    )


class ThreadsError(RuntimeError):
    """The thread count cannot be set: a bad count, or an ExecuTorch without a resizable thread pool."""


def _native(runtime: str) -> bool:
    return runtime == "native" or (runtime == "auto" and native_pte_model.is_available())


def cpu_threads(runtime: str = "auto") -> int | None:
    """ExecuTorch's thread-pool size now, or None when this ExecuTorch's Python bindings cannot report it."""
    if _native(runtime):
        return native_pte_model.native_cpu_threads() or None
    from executorch.extension.pybindings import portable_lib

    count = getattr(portable_lib, "_threadpool_get_thread_count", None)
    if count is None:
        return None
    with captured_runtime_log() as log:  # the first ask creates the pool, whose CPU-info probe logs
        threads = int(count())
    log.replay()
    return threads


def set_cpu_threads(threads: int, runtime: str = "auto") -> None:
    """Resize ExecuTorch's CPU thread pool to ``threads`` threads (ExecuTorch's
    ``extension/threadpool``'s ``_unsafe_reset_threadpool``).

    Call it before the first method runs, or between runs: resizing while a method runs on the pool is unsafe,
    which is why ExecuTorch names it so. torch's own intra-op pool is left alone (the runners keep it at one thread).

    Raises:
        ThreadsError: ``threads`` is outside 1..``MAX_THREADS``, or this ExecuTorch's bindings have no resizable pool.
    """
    if not 1 <= threads <= MAX_THREADS:
        raise ThreadsError(f"the thread count must be between 1 and {MAX_THREADS}, not {threads}")
    if _native(runtime):
        try:
            native_pte_model.set_native_cpu_threads(threads)
        except native_pte_model.NativeRuntimeError as exc:
            raise ThreadsError(str(exc)) from None
        return
    from executorch.extension.pybindings import portable_lib

    reset = getattr(portable_lib, "_unsafe_reset_threadpool", None)
    if reset is None:
        raise ThreadsError(
            "this ExecuTorch's Python bindings cannot resize the thread pool; leave the thread count at its default"
        )
    # The pool logs as it is rebuilt (its CPU-info probe, "Resetting threadpool to N threads"), through the same
    # stream as a .pte's load: captured and replayed where a quiet CLI sends library output.
    if cpu_threads(runtime) != threads:
        with captured_runtime_log() as log:
            reset(threads)
        log.replay()
