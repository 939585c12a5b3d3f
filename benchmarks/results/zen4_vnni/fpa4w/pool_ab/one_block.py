"""One fpa4w feed-forward block (1024 -> 4096 -> GELU -> 1024, LayerNorm; XNNPACK for the rest) as a .pte, timed at
M = 1, 125 and 625 rows in ExecuTorch's Python runtime; best mean of 5 rounds of 0.3 s.

    python one_block.py export          # writes /tmp/pool_op.pte
    FPA_LOWBIT_EXECUTORCH_LIB=OLD/libfpa_lowbit_executorch.so python one_block.py old
    python one_block.py new
"""

import sys
import time
from pathlib import Path

import torch

PTE = Path("/tmp/pool_op.pte")


def export() -> None:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from fpa_lowbit import UIntxWeightOnlyConfig
    from torch.export import Dim
    from torchao.quantization import quantize_

    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024), torch.nn.LayerNorm(1024)
    ).eval()
    quantize_(m, UIntxWeightOnlyConfig(bitwidth=4, group_size=32))
    ep = torch.export.export(m, (torch.randn(125, 1024),), dynamic_shapes=({0: Dim("M", min=1, max=4096)},))
    edge = to_edge_transform_and_lower(
        ep, partitioner=[XnnpackPartitioner()], compile_config=EdgeCompileConfig(_check_ir_validity=False)
    )
    PTE.write_bytes(edge.to_executorch().buffer)


def best_seconds(fn, rounds: int = 5, min_time: float = 0.3) -> float:
    best = float("inf")
    for _ in range(rounds):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < min_time:
            fn()
            n += 1
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def main(label: str) -> None:
    from executorch.runtime import Runtime
    from fpa_lowbit import executorch_kernels

    executorch_kernels.load()
    method = Runtime.get().load_program(str(PTE)).load_method("forward")
    cells = []
    for rows in (1, 125, 625):
        x = torch.randn(rows, 1024)
        for _ in range(5):
            method.execute([x])
        cells.append(f"M={rows}: {best_seconds(lambda x=x: method.execute([x])) * 1e3:.3f} ms")
    print(label, " | ".join(cells))


if __name__ == "__main__":
    export() if sys.argv[1] == "export" else main(sys.argv[1])
