"""Backends an export can target, the host each needs, and their ExecuTorch partitioners.

Host requirements are checked from the command line alone, before any model is loaded, so a user on the wrong
machine learns it in a second rather than after minutes of loading and tracing.
"""

from __future__ import annotations

import platform

import torch
from torch.export import ExportedProgram

from ..pte_format import COMPUTE_METHODS

BACKENDS = ("portable", "xnnpack", "metal", "mlx", "cuda")


class BackendError(RuntimeError):
    """The chosen backend cannot be lowered on this host, or does not take the chosen dtype."""


def check_host(backend: str, dtype: str) -> None:
    """Raise BackendError when this host cannot lower ``backend`` with ``dtype`` ("fp32" or "bf16")."""
    if backend not in BACKENDS:
        raise BackendError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if dtype == "bf16" and backend in ("portable", "xnnpack"):
        raise BackendError(f"--dtype bf16 is for the metal, mlx and cuda backends; export {backend} with --dtype fp32")
    # Metal compiles its kernels at export; ExecuTorch's MLX partitioner imports generated files that only its
    # macOS arm64 wheel ships. Both need that host.
    apple_reason = {
        "metal": " to compile the Metal kernels",
        "mlx": ", where the executorch wheel ships the MLX backend",
    }
    if backend in apple_reason and (platform.system() != "Darwin" or platform.machine() != "arm64"):
        raise BackendError(
            f"--backend {backend} needs a Mac with Apple silicon (macOS arm64){apple_reason[backend]}; this host is "
            f"{platform.system()} {platform.machine()}. Run the export on a Mac, or pick xnnpack."
        )
    if backend == "metal" and not torch.backends.mps.is_available():
        raise BackendError("--backend metal needs the MPS device, which PyTorch reports unavailable on this Mac")
    if backend == "cuda" and not torch.cuda.is_available():
        raise BackendError(
            "--backend cuda needs an NVIDIA GPU with a CUDA build of PyTorch and Triton at export "
            "time; this host has none. Export on a CUDA machine, or pick xnnpack."
        )


def partitioners(backend: str, programs: dict[str, ExportedProgram]):
    """Return (partitioner per method, programs rewritten as the backend needs) for ``to_edge_transform_and_lower``."""
    if backend in ("portable", "xnnpack"):
        # graph_cleanup.py: eval dropouts, transpose pairs and same-shape views are copies here (values unchanged).
        from .graph_cleanup import remove_inference_copies

        for name in COMPUTE_METHODS:
            if name in programs:
                remove_inference_copies(programs[name])
    if backend == "portable":
        # Decomposing lets torchao's weight-only dequantize (which has no ExecuTorch out variant) run as plain
        # portable ops while the int8 weights stay int8 constants; float graphs are unaffected.
        rewritten = {
            name: (ep.run_decompositions() if name in COMPUTE_METHODS else ep) for name, ep in programs.items()
        }
        return {name: [] for name in programs}, rewritten
    if backend == "xnnpack":
        from .xnnpack.partitioner import xnnpack_partitioner
        from .xnnpack.view_rewrites import rewrite_views

        # One partitioner of all precisions: in executorch 1.5.1 XnnpackDynamicallyQuantizedPartitioner also takes
        # fp32 linears/convs, one delegate each, which cut the encoder into hundreds of partitions.
        # rewrite_views: see xnnpack/view_rewrites.py (reshapes with one run-time size as -1, numerics unchanged).
        for name in COMPUTE_METHODS:
            if name in programs:
                rewrite_views(programs[name])
        return ({name: ([xnnpack_partitioner()] if name in COMPUTE_METHODS else []) for name in programs}, programs)
    if backend == "metal":
        return _metal_partitioners(programs)
    if backend == "mlx":
        return _mlx_partitioners(programs)
    if backend == "cuda":
        return _cuda_partitioners(programs)
    raise BackendError(f"unknown backend {backend!r}")


def lowering_configs(backend: str):
    """``(EdgeCompileConfig, ExecutorchBackendConfig)`` for ``backend``.

    Metal takes the settings of ExecuTorch's own Parakeet Metal export (``examples/models/parakeet/
    export_parakeet_tdt.py``), the configuration known to run on Apple GPUs: no dim-order ops in the edge graph
    (``_skip_dim_order``) and graph inputs not memory-planned (``alloc_graph_input=False``: the runner's input
    tensors are used in place). Other backends keep ExecuTorch's defaults, with which their .pte files are tested
    against NeMo.
    """
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    if backend == "metal":
        return (
            EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True),
            ExecutorchBackendConfig(
                extract_delegate_segments=True, memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False)
            ),
        )
    return EdgeCompileConfig(_check_ir_validity=False), ExecutorchBackendConfig(extract_delegate_segments=True)


def _linear_as_matmul(input, weight, bias=None):
    # Metal's AOTInductor path mishandles addmm's reinterpreted 0-stride bias; matmul + add avoids it.
    out = torch.ops.aten.matmul.default(input, torch.ops.aten.t.default(weight))
    return out if bias is None else torch.ops.aten.add.Tensor(out, bias)


def _metal_partitioners(programs):
    # MetalBackend.get_aoti_compile_options imports torchao's MPS C shims for every graph, quantized or not, and
    # that import fails unless torchao's MPS ops are registered (no wheel ships torchao's MPS library). The lowbit
    # package registers them under torchao's names, so importing it here lets none/8w/bf16 exports compile too.
    import fpa_lowbit  # noqa: F401
    from executorch.backends.apple.metal.metal_backend import MetalBackend
    from executorch.backends.apple.metal.metal_partitioner import MetalPartitioner

    table = torch.export.default_decompositions()
    table[torch.ops.aten.linear.default] = _linear_as_matmul
    rewritten = {
        name: (ep.run_decompositions(table) if name in COMPUTE_METHODS else ep) for name, ep in programs.items()
    }
    parts = {
        name: (
            [MetalPartitioner([MetalBackend.generate_method_name_compile_spec(name)])]
            if name in COMPUTE_METHODS
            else []
        )
        for name in programs
    }
    return parts, rewritten


def mlx_programs(programs: dict[str, ExportedProgram]) -> dict[str, ExportedProgram]:
    """The programs as the MLX partitioner receives them: the compute methods decomposed to the core ATen set,
    where a quantized linear is ``torchao.dequantize_affine`` (int8, block ``[1, g]``) + ``aten.linear``, the
    pattern ExecuTorch's MLX backend fuses into MLX's affine quantized matmul (``lowbit/torchao_intx.py``)."""
    return {name: (ep.run_decompositions({}) if name in COMPUTE_METHODS else ep) for name, ep in programs.items()}


def _mlx_partitioners(programs):
    from executorch.backends.mlx.partitioner import MLXPartitioner

    rewritten = mlx_programs(programs)
    return {name: ([MLXPartitioner()] if name in COMPUTE_METHODS else []) for name in programs}, rewritten


def _cuda_partitioners(programs):
    from executorch.backends.cuda.cuda_backend import CudaBackend
    from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
    from torch._inductor.decomposition import conv1d_to_conv2d

    rewritten = {
        name: (
            ep.run_decompositions({torch.ops.aten.conv1d.default: conv1d_to_conv2d}) if name in COMPUTE_METHODS else ep
        )
        for name, ep in programs.items()
    }
    parts = {
        name: (
            [CudaPartitioner([CudaBackend.generate_method_name_compile_spec(name)])] if name in COMPUTE_METHODS else []
        )
        for name in programs
    }
    return parts, rewritten
