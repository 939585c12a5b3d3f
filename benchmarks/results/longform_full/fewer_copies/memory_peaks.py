"""Where an fpa4w XNNPACK export's run-time memory goes, read from the export itself (no run).

Usage: python memory_peaks.py MODEL.nemo OUT_DIR [--max-audio-seconds 60]

Exports MODEL with ``--quantize fpa4w`` (capturing the lowered program), then prints
1. per XNNPACK delegate of the encoder, the largest sum of its internal values alive at once, at the export's bound
   (a lower bound of what XNNPACK's shared workspace must hold for it: its planner may also reuse less well), and
2. the encoder's executorch memory plan: its size and the values alive at the instruction where most bytes are.

The w2 model of this folder's README is ``parakeet-make-test-model --size full`` with 2 layers instead of 24 (every
per-layer and per-delegate value has v3's size; only the weights are fewer).
"""

import argparse
from pathlib import Path

import executorch.exir as exir
import torch
from torch.fx.experimental.symbolic_shapes import optimization_hint

parser = argparse.ArgumentParser()
parser.add_argument("model")
parser.add_argument("out_dir")
parser.add_argument("--max-audio-seconds", type=float, default=60.0)
args = parser.parse_args()

captured = {}
lower = exir.to_edge_transform_and_lower


def capture(*a, **k):
    captured["edge"] = lower(*a, **k)
    return captured["edge"]


exir.to_edge_transform_and_lower = capture
from parakeet_executorch.export.api import ExportOptions, export_pte  # noqa: E402

export_pte(
    args.model,
    ExportOptions(
        backend="xnnpack", quantize="fpa4w", output_dir=args.out_dir, max_audio_seconds=args.max_audio_seconds
    ),
)


def nbytes(val) -> int:
    if not isinstance(val, torch.Tensor):
        return 0
    n = val.element_size()
    for dim in val.shape:
        n *= optimization_hint(dim)  # the traced example is the longest input: hints are the bound
    return n


gm = captured["edge"].exported_program("encoder").graph_module
peaks = []
for node in gm.graph.nodes:
    if node.op != "call_function" or "call_delegate" not in str(node.target):
        continue
    nodes = list(getattr(gm, node.args[0].target).original_module.graph_module.graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    outputs = {a for n in nodes if n.op == "output" for a in n.args[0]}
    internal = [n for n in nodes if n.op == "call_function" and n not in outputs]
    last = {n: max([index[u] for u in n.users] + [index[n]]) for n in internal}
    best = (0, [])
    for i in range(len(nodes)):
        live = [n for n in internal if index[n] <= i <= last[n]]
        total = sum(nbytes(n.meta.get("val")) for n in live)
        best = max(best, (total, live), key=lambda b: b[0])
    peaks.append((best[0], node.name, best[1]))
print("XNNPACK delegates of the encoder, largest internal values alive at once:")
for total, name, live in sorted(peaks, key=lambda p: -p[0])[:5]:
    top = sorted(live, key=lambda n: -nbytes(n.meta.get("val")))[:4]
    parts = ", ".join(f"{n.name} {nbytes(n.meta.get('val')) / 2**20:.2f}" for n in top)
    print(f"  {name}: {total / 2**20:.1f} MiB ({parts})")

from executorch.exir._serialize._program import deserialize_pte_binary  # noqa: E402

program = deserialize_pte_binary((Path(args.out_dir) / "model.pte").read_bytes()).program
plan = next(p for p in program.execution_plan if p.name == "encoder")
print(f"encoder memory plan: {[f'{b / 2**20:.1f} MiB' for b in plan.non_const_buffer_sizes]}")
first, last, made_by = {}, {}, {}
for i, instruction in enumerate(plan.chains[0].instructions):
    call = instruction.instr_args
    if getattr(call, "args", None) is None:
        continue
    name = plan.operators[call.op_index].name if type(call).__name__ == "KernelCall" else "delegate"
    for v in call.args:
        first.setdefault(v, i)
        last[v] = i
        made_by.setdefault(v, name)
sizes = {}
for v, value in enumerate(plan.values):
    t = value.val
    if type(t).__name__ == "Tensor" and t.allocation_info is not None and v in first:
        sizes[v] = (4 * int(torch.tensor(t.sizes).prod()) if t.sizes else 4, list(t.sizes))
steps = range(len(plan.chains[0].instructions))
at = max(steps, key=lambda i: sum(s for v, (s, _) in sizes.items() if first[v] <= i <= last[v]))
live = sorted(((s, v) for v, (s, _) in sizes.items() if first[v] <= at <= last[v]), reverse=True)
print(f"most bytes alive at instruction {at}: {sum(s for s, _ in live) / 2**20:.1f} MiB")
for s, v in live[:10]:
    print(f"  {s / 2**20:6.2f} MiB {sizes[v][1]} made by {made_by[v]}")
