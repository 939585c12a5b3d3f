"""etdump_ops.py PTE TAG [AUDIO]: the encoder method of PTE on 60 s of AUDIO (looped) in ExecuTorch's Python
runtime with ETDump, 3 calls, each event's median over the calls after the first; prints the time per operator
kind (XNNPACK operators inside delegates, native_call_* for the portable kernels between them)."""

import collections
import re
import statistics
import sys
from pathlib import Path

import numpy as np
import torch
from executorch.devtools import Inspector
from executorch.extension.pybindings.portable_lib import _load_for_executorch

from parakeet_executorch.audio import load_audio
from parakeet_executorch.runtime.pte_model import PteModel

pte, tag = Path(sys.argv[1]), sys.argv[2]
audio_path = sys.argv[3] if len(sys.argv) > 3 else "jfk.wav"
model = PteModel(pte)
hop = model.metadata.hop_length
n = int(60 * 16000) // hop * hop
audio = torch.from_numpy(np.resize(load_audio(audio_path, 16000), n).astype("float32"))
features, frames = model.preprocessor(audio, n)
del model
module = _load_for_executorch(str(pte), enable_etdump=True, debug_buffer_size=0)
for _ in range(3):
    module.run_method("encoder", (features, torch.tensor([frames], dtype=torch.int64)))
etdump = f"{tag}.etdp"
module.write_etdump_result_to_file(etdump)
total: collections.Counter = collections.Counter()
calls: collections.Counter = collections.Counter()
for block in Inspector(etdump_path=etdump).event_blocks:
    for event in block.events:
        if event.perf_data is None or event.name in ("Program::load_method", "Method::init", "OPERATOR_CALL"):
            continue
        raw = list(event.perf_data.raw)
        kind = re.sub(r"\s*#\d+$", "", event.name)
        total[kind] += statistics.median(raw[1:] if len(raw) > 1 else raw)
        calls[kind] += 1
for kind, ms in total.most_common(40):
    print(f"{ms:9.1f} ms {calls[kind]:5d}x {kind}")
