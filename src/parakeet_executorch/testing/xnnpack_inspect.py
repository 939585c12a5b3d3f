"""Inspection helpers for tests and benchmarks: XNNPACK delegates and kernel calls in a lowered program."""

from __future__ import annotations

import torch


def _op_name(target) -> str:
    text = str(target)
    if text.startswith("<EdgeOpOverload: "):
        return text[len("<EdgeOpOverload: ") :].split(">")[0]
    return getattr(target, "__name__", text) if not hasattr(target, "_schema") else text


def delegate_summary(graph_module: torch.fx.GraphModule) -> dict:
    """Count XNNPACK delegate calls and ops left outside them in a lowered graph (``getitem`` not counted)."""
    import operator
    from collections import Counter

    delegates = 0
    outside: Counter = Counter()
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        name = getattr(node.target, "__name__", str(node.target))
        if name == "executorch_call_delegate":
            delegates += 1
        elif node.target is operator.getitem:
            continue
        else:
            outside[_op_name(node.target)] += 1
    return {"delegates": delegates, "non_delegated_ops": sum(outside.values()), "outside": dict(outside)}


def pte_instruction_counts(pte_bytes: bytes) -> dict:
    """Per method of a serialized .pte: ``{"delegates": backend calls, "kernel_calls": portable kernel calls}``
    (methods with neither, such as the metadata constants, are left out)."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(pte_bytes)
    program = getattr(program, "program", program)
    out = {}
    for plan in program.execution_plan:
        kernels = delegates = 0
        for chain in plan.chains:
            for ins in chain.instructions:
                kind = type(ins.instr_args).__name__
                delegates += kind == "DelegateCall"
                kernels += kind == "KernelCall"
        if delegates or kernels:
            out[plan.name] = {"delegates": delegates, "kernel_calls": kernels}
    return out
