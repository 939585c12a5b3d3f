"""Shortcuts through executorch 1.5.1's lowering that skip work which cannot change the result (issue 8).

Lowering the full-size encoder to XNNPACK took ~400 s, nearly all of it whole-graph replays through fake tensors
with a symbolic time dimension (about 0.6 s per conformer layer per replay), on one core. ``faster_lowering``
skips the replays that change nothing for a Parakeet encoder and spreads the per-partition work over the cores:

* ``decompose_in_one_retrace``: functionalization and decomposition in one retrace instead of two.
* ``skip_inert_passes``: the replays of passes that have no op to rewrite (Edge conversion and XNNPACK).
* ``skip_unchanged_retraces``: the metadata replay after an XNNPACK preprocess pass that edited nothing.
* ``skip_empty_decompositions``: a ``run_decompositions`` call, after the graph is functional, whose table has
  nothing to decompose in the graph.
* ``parallel_preprocess``: XNNPACK's preprocess of the partitions in forked worker processes.
* ``fast_affine_metadata``: the output shapes and dtypes of torchao's quantize / dequantize / choose-qparams ops
  during those replays, without running the ops' arithmetic on fake tensors (also in ``to_executorch``:
  ``faster_emit``).

Tests lower the same program with and without these shortcuts and require byte-identical .pte files.

The retraces
------------
executorch 1.5.1's ``XnnpackBackend.preprocess`` runs 17 passes on every partition, and each one ends by calling
``ExportPass.call``, which re-runs the whole partition through fake tensors to rebuild node metadata. With the
encoder's symbolic time dimension that replay costs about 0.6 s per conformer layer per pass (issue 8), and most
passes find nothing to do in a Parakeet graph (no bilinear upsampling, no SDPA pattern, no PReLU, no large
concatenation): the replay then rebuilds exactly the metadata the nodes already carry.

``skip_unchanged_retraces`` records a fingerprint of the partition's graph before each XNNPACK pass and lets
``ExportPass.call`` return the graph as it is when the pass left the fingerprint unchanged. A pass that edits the
graph or swaps a constant still gets its replay. The retrace copies each node's metadata onto its replayed node
and recomputes only ``val``/``tensor_meta`` from the ops, so an unchanged graph keeps valid metadata without it.
"""

from __future__ import annotations

import os
import threading
import warnings
from contextlib import contextmanager

import torch

_state = threading.local()


def graph_fingerprint(graph_module: torch.fx.GraphModule) -> tuple:
    """Return a hashable summary of ``graph_module``'s structure: every node's op, target and arguments (nodes by
    name), and the identity of every attribute a ``get_attr`` node reads (so a pass that replaces a constant, as
    XNNPACK's PReLU pass does, counts as a change). Node metadata is not included."""
    items = []
    for node in graph_module.graph.nodes:
        args = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: ("node", n.name))
        target = node.target if isinstance(node.target, str) else id(node.target)
        extra = None
        if node.op == "get_attr":
            obj = graph_module
            for part in node.target.split("."):
                obj = getattr(obj, part, None)
            extra = id(obj)
        items.append((node.name, node.op, target, repr(args), extra))
    return tuple(items)


_REPLAY_HOOKS = ("placeholder", "output", "inputs", "on_attr", "call_operator", "call_sym", "call_getitem",
                 "call_cond", "call_map", "call_while", "call_scan", "call_delegate", "call_submodule",
                 "call_size_operator", "call_size_operator_all")


def _replay_transforms(pass_class: type, export_pass: type) -> bool:
    """True when ``pass_class`` does its work during the replay itself (it overrides a hook the replay calls, as
    ``DimOrderOpsRevertPass`` and ``ConstPropPass`` do): skipping its replay would skip the pass."""
    return any(getattr(pass_class, hook, None) is not getattr(export_pass, hook, None) for hook in _REPLAY_HOOKS)


@contextmanager
def skip_unchanged_retraces():
    """Within this context, XNNPACK's preprocess skips the metadata replay of passes that changed nothing.

    Counts are kept in ``skip_unchanged_retraces.stats`` (``{"skipped": n, "replayed": m}``) for tests and
    benchmarks. Restores executorch's classes on exit, also on error.
    """
    from executorch.backends.xnnpack import _passes as xnn_passes
    from executorch.backends.xnnpack.xnnpack_preprocess import XNNPACKPassManager
    from executorch.exir.pass_base import ExportPass, PassResult

    original_call = ExportPass.call
    original_transform = XNNPACKPassManager.transform
    stats = skip_unchanged_retraces.stats = {"skipped": 0, "replayed": 0}

    def call(self, graph_module):
        before = getattr(_state, "fingerprints", {}).get(id(graph_module))
        if before is not None and not _replay_transforms(type(self), ExportPass):
            if graph_fingerprint(graph_module) == before:
                stats["skipped"] += 1
                return PassResult(graph_module, False)
            stats["replayed"] += 1
        return original_call(self, graph_module)

    def transform(manager):
        # Mirrors XNNPACKPassManager.transform, with a fingerprint taken before each pass.
        ep = manager.exported_program
        for pass_ in manager.passes:
            if issubclass(pass_, xnn_passes.XNNPACKPass):
                transform_pass = pass_(ep)
            elif issubclass(pass_, ExportPass):
                transform_pass = pass_()
            else:
                raise RuntimeError(f"expected an ExportPass subclass, got {pass_!r}")
            _state.fingerprints = {id(ep.graph_module): graph_fingerprint(ep.graph_module)}
            try:
                ep = xnn_passes._transform(ep, transform_pass)
            finally:
                _state.fingerprints = {}
        return ep

    ExportPass.call = call
    XNNPACKPassManager.transform = transform
    try:
        yield stats
    finally:
        ExportPass.call = original_call
        XNNPACKPassManager.transform = original_transform


skip_unchanged_retraces.stats = {"skipped": 0, "replayed": 0}


# aten.sym_size.int is in the default table but a size read has nothing to decompose into: it is how a symbolic
# dimension appears in the graph, and a re-export keeps it.
_NOTHING_TO_DECOMPOSE = ("aten.sym_size.int",)


@contextmanager
def skip_empty_decompositions():
    """Within this context, ``ExportedProgram.run_decompositions(table)`` returns the program unchanged when
    ``table`` is not empty and no ``call_function`` node's target is in it (``aten.sym_size.int`` aside).

    ``to_edge_transform_and_lower`` runs a program through ``run_decompositions`` three times before lowering to
    XNNPACK: once with an empty table (functionalization; never skipped here), once with the partitioner's
    preserved ops left out of the table, and once more with the full table for preserved ops the partitioner
    then rejected. When it rejected none, the third call re-exports the whole graph to change nothing (~50 s for
    the full-size encoder). Counts are kept in ``skip_empty_decompositions.stats``.
    """
    from torch.export import ExportedProgram

    original = ExportedProgram.run_decompositions
    stats = skip_empty_decompositions.stats = {"skipped": 0, "run": 0}

    def run_decompositions(self, decomp_table=None, *args, **kwargs):
        if decomp_table and not any(
                node.op == "call_function" and node.target in decomp_table
                and str(node.target) not in _NOTHING_TO_DECOMPOSE for node in self.graph_module.graph.nodes):
            stats["skipped"] += 1
            return self
        stats["run"] += 1
        return original(self, decomp_table, *args, **kwargs)

    ExportedProgram.run_decompositions = run_decompositions
    try:
        yield stats
    finally:
        ExportedProgram.run_decompositions = original


skip_empty_decompositions.stats = {"skipped": 0, "run": 0}


# --------------------------------------------------------------------------------------------------------------
# Passes with nothing to rewrite
# --------------------------------------------------------------------------------------------------------------
#
# Some ExportPass subclasses only rewrite ops of one kind, during a full replay of the graph through fake tensors
# (~10 s per pass for the full-size encoder). Three run while converting to the Edge dialect, two more in every
# XNNPACK partition's preprocess; a Parakeet graph has no op of their kind by then, and the replay rebuilds the
# same graph. Each predicate below says, from the graph alone, whether the pass could change an op: it mirrors
# the condition in the pass's ``call_operator`` (executorch 1.5.1, ``exir/passes/``).


def _op_nodes(graph_module: torch.fx.GraphModule):
    """The nodes a replay hands to ``call_operator``: calls of ATen/custom ops and of Edge ops."""
    from executorch.exir.dialects.edge._ops import EdgeOpOverload

    kinds = (torch._ops.OpOverload, torch._ops.OpOverloadPacket, EdgeOpOverload)
    return [n for n in graph_module.graph.nodes if n.op == "call_function" and isinstance(n.target, kinds)]


def _has_aten_t(graph_module) -> bool:  # NormalizeTransposePass: aten.t -> aten.t_copy
    return any(n.target == torch.ops.aten.t.default for n in _op_nodes(graph_module))


def _has_view_op(graph_module) -> bool:  # ReplaceBrokenOpsWithFunctionalOpsPass: view ops -> their _copy
    return any(getattr(n.target, "is_view", True) for n in _op_nodes(graph_module))


def _has_symbolic_tensor_argument(graph_module) -> bool:
    """SymToTensorPass: a SymInt/SymFloat/SymBool passed where the schema takes a Tensor."""
    from executorch.exir.pass_base import map_args

    found = False

    def check(value, argument):
        nonlocal found
        if (isinstance(value, torch.fx.Node) and isinstance(argument.type, torch.TensorType)
                and type(value.meta.get("val")) in (torch.SymInt, torch.SymFloat, torch.SymBool)):
            found = True
        return value

    for node in _op_nodes(graph_module):
        map_args(node.target, check, tuple(node.args), dict(node.kwargs))
        if found:
            return True
    return False


def _has_dim_order_op(graph_module) -> bool:  # DimOrderOpsRevertPass: dim-order ops -> memory-format ops
    from executorch.exir.passes.dim_order_ops_registry import MemoryFormatOpsMap

    return any(n.target in MemoryFormatOpsMap for n in _op_nodes(graph_module))


def _has_constant_op(graph_module) -> bool:
    """ConstPropPass folds an op whose arguments are all constants during the replay: Python values, or tensors
    a ``get_attr`` reads (the replay hands those over as real tensors; any other node is a fake value)."""
    for node in _op_nodes(graph_module):
        inputs = []
        torch.fx.node.map_arg((node.args, node.kwargs), inputs.append)
        if all(n.op == "get_attr" for n in inputs):
            return True
    return False


def _replays_only_op_overloads(graph_module) -> bool:
    """True when the replay would only visit plain ops (no submodules, no higher-order ops such as cond or map,
    whose bodies the replay would enter), so that a predicate over the top-level nodes sees every op."""
    for node in graph_module.graph.nodes:
        if node.op == "call_module":
            return False
        if node.op == "call_function" and isinstance(node.target, torch._ops.HigherOrderOperator):
            return False
    return True


def _inert_pass_predicates() -> dict:
    from executorch.exir.passes import (NormalizeTransposePass, ReplaceBrokenOpsWithFunctionalOpsPass,
                                        SymToTensorPass)
    from executorch.exir.passes.const_prop_pass import ConstPropPass
    from executorch.exir.passes.memory_format_ops_pass import DimOrderOpsRevertPass

    return {NormalizeTransposePass: _has_aten_t,
            ReplaceBrokenOpsWithFunctionalOpsPass: _has_view_op,
            SymToTensorPass: _has_symbolic_tensor_argument,
            DimOrderOpsRevertPass: _has_dim_order_op,
            ConstPropPass: _has_constant_op}


@contextmanager
def skip_inert_passes():
    """Within this context, the passes of ``_inert_pass_predicates`` (``NormalizeTransposePass``,
    ``ReplaceBrokenOpsWithFunctionalOpsPass``, ``SymToTensorPass``, ``DimOrderOpsRevertPass``, ``ConstPropPass``)
    return the graph as it is when it holds no op they would rewrite, instead of replaying it to rebuild the same
    graph. A graph with submodules or higher-order ops is always replayed. Counts are kept in
    ``skip_inert_passes.stats`` (``{"skipped": n, "replayed": m}``). Restores executorch's classes on exit, also
    on error.
    """
    from executorch.exir.pass_base import PassResult

    stats = skip_inert_passes.stats = {"skipped": 0, "replayed": 0}
    originals = {}
    for pass_class, needs_replay in _inert_pass_predicates().items():
        originals[pass_class] = own = pass_class.__dict__.get("call")

        def call(self, graph_module, _needs_replay=needs_replay, _class=pass_class, _own=own):
            if _replays_only_op_overloads(graph_module) and not _needs_replay(graph_module):
                stats["skipped"] += 1
                return PassResult(graph_module, False)
            stats["replayed"] += 1
            # Looked up at call time, so that another shortcut wrapping ExportPass.call still applies.
            return _own(self, graph_module) if _own is not None else super(_class, self).call(graph_module)

        pass_class.call = call
    try:
        yield stats
    finally:
        for pass_class, original in originals.items():
            if original is None:
                del pass_class.call
            else:
                pass_class.call = original


skip_inert_passes.stats = {"skipped": 0, "replayed": 0}


@contextmanager
def decompose_in_one_retrace(programs: dict | None = None, partitioners: dict | None = None):
    """Within this context, functionalizing a program that will be lowered to XNNPACK also decomposes it.

    ``to_edge_transform_and_lower`` retraces each program twice before partitioning: ``run_decompositions({})``
    (functionalize only) so that it can ask the partitioner which ops to keep, then ``run_decompositions`` with
    the core-ATen table less those ops. XNNPACK's answer does not depend on the graph (``XnnpackPartitioner``
    reads it from its op configs), so here the first call already applies that table, on the training-IR
    program, and the second finds nothing left and is skipped by ``skip_empty_decompositions``. One retrace of
    the full-size encoder (~40 s) is saved; if the partitioner asks to keep other ops than expected, the second
    call still runs, so the program is the same either way.

    Args:
        programs: method name -> the ``ExportedProgram`` about to be lowered (the objects passed to
            ``to_edge_transform_and_lower``; matched by identity).
        partitioners: method name -> list of partitioners, as passed to ``to_edge_transform_and_lower``. Only
            methods whose one partitioner is an ``XnnpackPartitioner`` take the shortcut.

    Counts are kept in ``decompose_in_one_retrace.stats`` (``{"merged": n}``).
    """
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir.program._program import _default_decomposition_table
    from torch.export import ExportedProgram

    tables = {}
    for name, program in (programs or {}).items():
        parts = (partitioners or {}).get(name) or []
        if len(parts) == 1 and isinstance(parts[0], XnnpackPartitioner):
            table = _default_decomposition_table()
            for op in parts[0].ops_to_not_decompose(program)[0]:
                table.pop(op, None)
            tables[id(program)] = (program, table)  # the program is kept so that its id cannot be reused
    original = ExportedProgram.run_decompositions
    stats = decompose_in_one_retrace.stats = {"merged": 0}

    def run_decompositions(self, decomp_table=None, *args, **kwargs):
        entry = tables.get(id(self))
        if decomp_table == {} and entry is not None and entry[0] is self:
            stats["merged"] += 1
            return original(self, entry[1], *args, **kwargs)
        return original(self, decomp_table, *args, **kwargs)

    ExportedProgram.run_decompositions = run_decompositions
    try:
        yield stats
    finally:
        ExportedProgram.run_decompositions = original


decompose_in_one_retrace.stats = {"merged": 0}


@contextmanager
def faster_lowering(programs: dict | None = None, partitioners: dict | None = None):
    """All the shortcuts of this module, for the span of one ``to_edge_transform_and_lower(programs,
    partitioner=partitioners)`` call (the two arguments let ``decompose_in_one_retrace`` find the programs)."""
    with (decompose_in_one_retrace(programs, partitioners), skip_inert_passes(), skip_unchanged_retraces(),
          skip_empty_decompositions(), fast_affine_metadata(), parallel_preprocess()):
        yield


@contextmanager
def faster_emit():
    """The shortcuts that apply to ``EdgeProgramManager.to_executorch``: its spec-propagation replays evaluate
    every delegate's original graph through fake tensors, torchao's affine ops included (``fast_affine_metadata``;
    at 4 full-width layers of 8da4w, 21 -> 10 s)."""
    with fast_affine_metadata():
        yield


# --------------------------------------------------------------------------------------------------------------
# torchao's affine quantization ops, replayed for their metadata only
# --------------------------------------------------------------------------------------------------------------
#
# An 8da4w / 8da8w graph carries, per linear, torchao's choose_qparams_affine, quantize_affine and two
# dequantize_affine ops. torchao registers them as CompositeImplicitAutograd Python functions, so every replay
# through fake tensors (each metadata replay above, and the fake evaluation of preserved ops in
# run_decompositions) runs their whole arithmetic, 10-30 ops with symbolic sizes, only to learn an output shape:
# 15-20 ms per op, about half the replay time of a quantized encoder. Their outputs' metadata follows from the
# arguments alone, as below.


def _reduction_shape(block_size, size) -> list:
    """The shape of a reduction over torchao's blocks (``keepdim=False``): ``_get_reduction_params``' view of
    ``size`` with its reduced dimensions left out. A dimension split into blocks keeps ``size // block``, one
    with block 1 keeps its size, one that is a single block disappears."""
    from torchao.quantization.quant_primitives import _get_reduction_params

    shape, reduced = _get_reduction_params(block_size, size)
    return [s for i, s in enumerate(shape) if i not in reduced]


def _choose_qparams_metadata(input, mapping_type, block_size, target_dtype, quant_min=None, quant_max=None,
                             eps=None, scale_dtype=None, zero_point_dtype=None, keepdim=False):
    if keepdim:
        shape = [input.size(i) // block_size[i] for i in range(len(block_size))]
    else:
        shape = _reduction_shape(block_size, input.size())
    if zero_point_dtype is None:
        # torchao: int32 for asymmetric mappings; symmetric ones keep the zero point in the input's dtype.
        zero_point_dtype = torch.int32 if mapping_type == "ASYMMETRIC" else input.dtype
    return (input.new_empty(shape, dtype=scale_dtype or input.dtype),
            input.new_empty(shape, dtype=zero_point_dtype))


def _quantize_metadata(input, block_size, scale, zero_point, output_dtype, quant_min=None, quant_max=None):
    from torchao.quantization.quant_primitives import _SUB_BYTE_UINT_BOUNDS

    return input.new_empty(input.shape, dtype=torch.uint8 if output_dtype in _SUB_BYTE_UINT_BOUNDS else output_dtype)


def _dequantize_metadata(input, block_size, scale, zero_point, input_dtype, quant_min=None, quant_max=None,
                         output_dtype=torch.float32):
    return input.new_empty(input.shape, dtype=output_dtype)


_AFFINE_METADATA = {"choose_qparams_affine": _choose_qparams_metadata,
                    "quantize_affine": _quantize_metadata,
                    "dequantize_affine": _dequantize_metadata}


def _metadata_only(args) -> bool:
    """True when an op call can only be asking for output metadata: every tensor argument is a contiguous
    FakeTensor and no tracing mode (proxy or functionalization) is recording ops, so nothing but the outputs'
    shape, strides and dtype can be observed. While a graph is being traced the op's real decomposition runs."""
    from torch._subclasses.fake_tensor import FakeTensor

    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors or not all(type(t) is FakeTensor for t in tensors) or not tensors[0].is_contiguous():
        return False
    return all(torch._C._get_dispatch_mode(key) is None
               for key in (torch._C._TorchDispatchModeKey.PROXY, torch._C._TorchDispatchModeKey.FUNCTIONAL))


_affine_library: torch.library.Library | None = None
_affine_depth = 0  # how many fast_affine_metadata contexts are open


def _install_affine_kernels() -> None:
    """Register, once per process, a kernel for each op that takes the shortcut while a ``fast_affine_metadata``
    context is open and otherwise calls torchao's own Python implementation (the function torchao registers).

    Once and for good, because the dispatcher cannot take such an override back: after the override's library
    is destroyed, fake-tensor calls (``OpOverload.decompose``) still reach it (torch 2.13). Outside the context
    the kernel is torchao's function, so nothing changes for other callers.
    """
    global _affine_library
    if _affine_library is not None:
        return
    from torch._inductor.decomposition import decompositions

    lib = torch.library.Library("torchao", "IMPL")
    for name, fast in _AFFINE_METADATA.items():
        original = decompositions[getattr(torch.ops.torchao, name).default]  # torchao's implementation

        def kernel(*args, _fast=fast, _original=original, **kwargs):
            if not _affine_depth:
                return _original(*args, **kwargs)
            if _metadata_only(args):
                fast_affine_metadata.stats["metadata"] += 1
                return _fast(*args, **kwargs)
            fast_affine_metadata.stats["computed"] += 1
            return _original(*args, **kwargs)

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
            lib.impl(name, kernel, "CompositeImplicitAutograd")
    _affine_library = lib


@contextmanager
def fast_affine_metadata():
    """Within this context, torchao's ``choose_qparams_affine``, ``quantize_affine`` and ``dequantize_affine`` on
    fake tensors outside any tracing return empty outputs of the shapes and dtypes their arithmetic would give;
    anywhere else (real tensors, tracing, a non-contiguous input) they run torchao's own implementation.

    Mirrors torchao 0.18's ``torchao/quantization/quant_primitives.py`` (shapes from ``_get_reduction_params``).
    tests/test_lowering_speedups.py compares both on every argument pattern the recipes use and requires
    byte-identical 8da4w and 8da8w .pte files. Counts are kept in ``fast_affine_metadata.stats``.
    """
    global _affine_depth
    import torchao.quantization  # noqa: F401  (defines the ops)

    _install_affine_kernels()
    fast_affine_metadata.stats = {"metadata": 0, "computed": 0}
    _affine_depth += 1
    try:
        yield fast_affine_metadata.stats
    finally:
        _affine_depth -= 1


fast_affine_metadata.stats = {"metadata": 0, "computed": 0}


# --------------------------------------------------------------------------------------------------------------
# Partitions preprocessed side by side
# --------------------------------------------------------------------------------------------------------------

_jobs: list = []  # (backend class, edge program, compile specs), read by forked workers


def _counters() -> list:
    """The stats of the shortcuts that also run inside preprocess workers (their counts go back to the parent)."""
    return [skip_unchanged_retraces.stats, skip_inert_passes.stats]


def _preprocess_job(index: int):
    backend, program, specs = _jobs[index]
    before = [dict(stats) for stats in _counters()]
    result = backend.preprocess(program, specs)
    return result, [{key: stats[key] - old.get(key, 0) for key in stats} for stats, old in zip(_counters(), before)]


def _single_threaded_worker():
    torch.set_num_threads(1)  # a forked child must not enter the parent's OpenMP pool


@contextmanager
def parallel_preprocess(workers: int | None = None):
    """Within this context, XNNPACK preprocesses the partitions of all methods in ``workers`` forked processes
    (default: the CPUs this process may use), instead of one after the other.

    Each partition's preprocess reads only its own edge program and returns bytes (the XNNPACK flatbuffer and the
    weights it names), so the order of work cannot change the result; results are put back in the partition
    order executorch expects. Linux only: elsewhere (macOS forbids forking a process that has started
    Objective-C or Metal), with one CPU, or with fewer than two partitions, it runs as shipped.

    Raises:
        concurrent.futures.process.BrokenProcessPool: a worker died (for example killed for memory); the export
            fails rather than waiting for a partition that will never come.
    """
    import multiprocessing
    import sys
    from concurrent.futures import ProcessPoolExecutor

    from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend

    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    original = XnnpackBackend.__dict__.get("preprocess_multimethod")

    def preprocess_multimethod(cls, edge_programs, compile_specs):
        order = [(name, i) for name, programs in edge_programs.items() for i in range(len(programs))]
        if workers < 2 or len(order) < 2 or not sys.platform.startswith("linux"):
            return super(XnnpackBackend, cls).preprocess_multimethod(edge_programs, compile_specs)
        _jobs[:] = [(cls, edge_programs[name][i], compile_specs[name][i]) for name, i in order]
        try:
            with ProcessPoolExecutor(min(workers, len(order)), mp_context=multiprocessing.get_context("fork"),
                                     initializer=_single_threaded_worker) as pool:
                results = list(pool.map(_preprocess_job, range(len(order))))
        finally:
            _jobs.clear()
        out: dict = {name: [] for name in edge_programs}
        for (name, _), (result, counts) in zip(order, results):
            out[name].append(result)
            for stats, child in zip(_counters(), counts):
                for key, value in child.items():
                    stats[key] += value
        return out

    XnnpackBackend.preprocess_multimethod = classmethod(preprocess_multimethod)
    try:
        yield
    finally:
        if original is None:
            del XnnpackBackend.preprocess_multimethod
        else:
            XnnpackBackend.preprocess_multimethod = original
