"""Which XNNPACK recipe is fastest on a CPU, from its instruction-set features (``parakeet-export --quantize auto``).

XNNPACK's dynamically quantized GEMMs (8da4w: int8 activations x int4 weights; 8da8w: int8 x int8) are fast where
the CPU has an int8 dot-product instruction (x86: AVX-512 VNNI, AVX-VNNI or AMX). Without one, the int8 x int4
kernels lose to fp32 and the int8 x int8 ones barely win. Full-size transcription RTFx at 60 s (Python runner,
2 threads, ``benchmarks/bench_transcribe.py``, random-weight v3-shaped model):

===========================================  =====  =====  =====  ===========
CPU                                          fp32   8da4w  8da8w  8da8w+fpa8w
===========================================  =====  =====  =====  ===========
Xeon, AVX-512 VNNI (2026-12-01)              12.27  20.26  18.41  -
AMD EPYC, AVX2 + FMA, no VNNI (2026-12-01)   9.41   6.10   10.22  -
Xeon, AVX-512 VNNI (2026-12-06, 1x1 q.)      13.40  24.00  24.54  -
AMD EPYC Zen 3, AVX2 + FMA (2026-12-06)      9.23   6.07   10.07  10.30
===========================================  =====  =====  =====  ===========

The third row is after 8da8w began to quantize the conformer's 1x1 convolutions too: its encoder then took
1.78 s at 60 s against 8da4w's 2.37 s (1.33x) and 0.243 s against 0.303 s at 10 s, at equal work (8da4w's end-to-end
figure is flattered by the random-weight model emitting 1.4 tokens/s under it against 3.2 under 8da8w). In the
greedy loop the other way round: one joint or prediction-network call (M = 1) is fastest with 8da4w's weights,
and the 8da8w encoder with 8da4w decoder and joint took 0.176 s of loop at 60 s against 0.590 s with 8da8w's and
0.338 s with fp32's (``benchmarks/results/transcribe_pointwise/``).

8da4w's speed there has a price: on the trained demo model the 8da8w encoder with 8da4w decoder and joint moved
WER by +0.9 to +1.9 points (as eager on 406 of 751 clips), nearly 8da4w's whole damage, while with an fp32 decoder
and joint it stayed within -0.3..+0.1 (718 of 751 clips as eager), the closest of all quantized exports.

``fpa8w`` (8-bit weights, float activations, fpa_lowbit's GEMV; the LSTM's gate weights quantized too, see
``lstm.py``) then took the loop further without that price: with the 8da8w encoder, 0.244 s of loop at 60 s
against fp32's 0.447 s in the Python runner and 0.165 s against 0.316 s in the C++ runner (at 10 s 0.042 against
0.075 s and 0.029 against 0.058 s; ``benchmarks/results/fpa8w_decoder/``), one decoder step 0.28-0.38 ms against
0.84 ms and one joint call 0.29-0.38 ms against 0.56 ms, with the trained demo model's WER as with fp32's decoder
and joint (same results folder).

On an AVX2 + FMA CPU without VNNI (the last row, ``benchmarks/results/avx2_epyc/``) XNNPACK's int8 x int8 encoder is
barely faster than fp32's (0.832 against 0.906 s at 10 s, 5.65 against 6.04 s at 60 s) and its int8 x int4 one
is much slower (1.52 / 9.63 s), while fpa8w's GEMV still wins the greedy loop: 0.184 s at 60 s against 8da8w's
0.215 s and fp32's 0.307 s in the Python runner, 0.137 against 0.157 and 0.257 s in the C++ runner (at 10 s
1-3 ms behind 8da8w's, 1.9-2.1x ahead of fp32's).

So: on x86 with AVX2 + FMA, with or without VNNI, the 8da8w encoder with fpa8w decoder and joint; fp32
(``none``) below AVX2, where nothing was measured. Other architectures (arm64: XNNPACK's int8 kernels use its
dot-product instructions) get 8da4w, ExecuTorch's usual CPU recipe, unmeasured here. The advice is for the
machine that *runs* the .pte; a .pte exported on one machine runs on any other, only at that machine's speed.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

# x86 flags (as /proc/cpuinfo spells them) that give XNNPACK an int8 dot product.
INT8_DOT_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


@dataclass(frozen=True)
class CpuFeatures:
    """A CPU's architecture and instruction-set flags.

    Attributes:
        arch: ``platform.machine()`` spelling, lower case (``x86_64``, ``amd64``, ``arm64``, ``aarch64``).
        flags: x86 feature flags as /proc/cpuinfo lists them (``avx2``, ``fma``, ``avx512_vnni``, ...); empty where
            they are unknown (macOS, Windows, Arm).
    """

    arch: str
    flags: frozenset[str] = frozenset()

    @property
    def is_x86(self) -> bool:
        return self.arch in ("x86_64", "amd64", "i386", "i686", "x86")

    @property
    def int8_dot(self) -> bool:
        """An int8 dot-product instruction XNNPACK uses (x86: one of ``INT8_DOT_FLAGS``)."""
        return any(f in self.flags for f in INT8_DOT_FLAGS)

    def describe(self) -> str:
        """e.g. ``x86_64 with avx2, fma, avx512_vnni``."""
        shown = [f for f in ("avx2", "fma", "avx512f", *INT8_DOT_FLAGS) if f in self.flags]
        return f"{self.arch} with {', '.join(shown)}" if shown else self.arch


def parse_cpuinfo(text: str, arch: str = "x86_64") -> CpuFeatures:
    """The features in a Linux /proc/cpuinfo text (the first ``flags`` line; x86 only has one)."""
    for line in text.splitlines():
        if line.startswith("flags"):
            return CpuFeatures(arch, frozenset(line.split(":", 1)[1].split()))
    return CpuFeatures(arch)


def host_cpu_features() -> CpuFeatures:
    """This machine's CPU: /proc/cpuinfo's flags on Linux, the architecture alone elsewhere."""
    arch = platform.machine().lower() or "unknown"
    try:
        return parse_cpuinfo(Path("/proc/cpuinfo").read_text(), arch)
    except OSError:
        return CpuFeatures(arch)


@dataclass(frozen=True)
class CpuRecipeAdvice:
    """The XNNPACK recipe to use on a CPU, and why.

    Attributes:
        recipe: a ``--quantize`` name (``8da4w``, ``8da8w`` or ``none``), for the encoder and, unless
            ``decoder_recipe`` says otherwise, the decoder and joint.
        reason: one line naming the CPU features and the measurement behind the choice.
        measured: whether a CPU of this kind was benchmarked (module docstring's table).
        decoder_recipe: a ``--quantize-decoder`` name for the prediction network and joint, or None for ``recipe``.
    """

    recipe: str
    reason: str
    measured: bool
    decoder_recipe: str | None = None


def recommended_cpu_recipe(cpu: CpuFeatures) -> CpuRecipeAdvice:
    """The fastest XNNPACK recipe for ``cpu`` that is never slower than fp32 where measured (module docstring)."""
    what = cpu.describe()
    if not cpu.is_x86:
        return CpuRecipeAdvice(
            "8da4w", f"{what}: XNNPACK's int8 dot-product kernels; not benchmarked on this architecture", False
        )
    if cpu.int8_dot:
        return CpuRecipeAdvice(
            "8da8w",
            f"{what}: int8 dot products (VNNI). Measured on such a CPU: the 8da8w encoder 1.33x faster than 8da4w's "
            "at 60 s; the greedy loop 1.8-2.0x faster with fpa8w's 8-bit decoder and joint than with fp32's, at "
            "fp32's WER on the trained demo model",
            True,
            decoder_recipe="fpa8w",
        )
    if "avx2" in cpu.flags and "fma" in cpu.flags:
        return CpuRecipeAdvice(
            "8da8w",
            f"{what}, no VNNI: measured on such a CPU, the 8da8w encoder 1.07-1.09x fp32's and 8da4w's 0.59-0.63x "
            "(slower than fp32); the greedy loop 1.67-2.08x faster with fpa8w's 8-bit decoder and joint than with "
            "fp32's",
            True,
            decoder_recipe="fpa8w",
        )
    return CpuRecipeAdvice(
        "none", f"{what}, no AVX2: XNNPACK's int8 recipes were not measured on such a CPU; fp32 is safe", False
    )


def slow_recipe_warning(recipe: str, cpu: CpuFeatures) -> str | None:
    """A one-line warning when ``recipe`` was measured slower than fp32 on a CPU like ``cpu`` (8da4w without
    VNNI on x86), naming the faster choice; None otherwise."""
    if recipe != "8da4w" or not cpu.is_x86 or cpu.int8_dot:
        return None
    better = recommended_cpu_recipe(cpu).recipe
    return (
        f"this CPU ({cpu.describe()}) has no VNNI: 8da4w ran at 0.63-0.66x fp32's speed on such CPUs; "
        f"--quantize {better} (or auto) is faster here, and the .pte is fine for CPUs with VNNI"
    )
