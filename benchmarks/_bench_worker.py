"""Child processes of bench_transcribe.py. Each system runs in its own process so that its peak RSS (VmHWM) is its
own; the parent drives all of them over a line-JSON protocol so that timed runs can interleave (A B C A B C ...).

Persistent systems (``serve KIND ...``): after loading, the worker writes ``{"ready": true, "load_s": ...}``; then for
each request ``{"cmd": "run", "audio": "x.npy"}`` it transcribes once and writes ``{"tokens": [...], "wall_s": ...}``;
on ``{"cmd": "exit"}`` it writes ``{"vmhwm_kb": ...}`` and exits. Kinds: ``nemo`` (NeMo eager ``transcribe()``),
``pte`` (this project's Python runner), ``ort`` (NeMo's ONNX export run by onnxruntime with a greedy TDT loop).

One-shot steps (``prepare``, ``export``, ``onnx-export``, ``onnx-quantize``) build the benchmark's inputs; the
parent measures their wall time and peak RSS from the outside (os.wait4). ``export MODEL OPTIONS_JSON`` runs
``export_pte(MODEL, ExportOptions(**OPTIONS_JSON))``, printing its progress; ``export_step`` builds that command
from typed ``ExportOptions``.

The protocol uses a private copy of the original stdout; fd 1 is pointed at stderr so that library prints
(NeMo, ExecuTorch) cannot corrupt it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def vmhwm_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


def set_threads(n: int, torch_threads: int | None = None) -> None:
    """ExecuTorch's thread pool at ``n`` threads and torch's intra-op pool at ``torch_threads`` (default ``n``)."""
    import torch

    torch.set_num_threads(n if torch_threads is None else torch_threads)
    try:
        from executorch.extension.pybindings.portable_lib import _unsafe_reset_threadpool

        _unsafe_reset_threadpool(n)
    except Exception:  # older executorch: threadpool keeps its default (one thread per core)
        pass


# ---------------------------------------------------------------------------------------------------------------
# systems


class NemoSystem:
    def __init__(self, nemo: str, threads: int):
        import logging

        import torch
        from nemo.collections.asr.models import ASRModel
        from nemo.utils import logging as nemo_logging

        nemo_logging.setLevel(logging.ERROR)
        torch.set_num_threads(threads)
        self.model = ASRModel.restore_from(nemo, map_location="cpu")
        self.model.eval()
        # The seconds inside NeMo's preprocessor and encoder modules during transcribe(), from forward hooks: the
        # encoder alone can then be set against the other systems' encoders.
        self._spent: dict[str, float] = {}
        self._started: dict[str, float] = {}
        for stage, module in (("preprocess", self.model.preprocessor), ("encode", self.model.encoder)):
            module.register_forward_pre_hook(self._start_hook(stage))
            module.register_forward_hook(self._stop_hook(stage))

    def _start_hook(self, stage):
        def hook(module, args):
            self._started[stage] = time.perf_counter()

        return hook

    def _stop_hook(self, stage):
        def hook(module, args, output):
            self._spent[stage] = self._spent.get(stage, 0.0) + time.perf_counter() - self._started[stage]

        return hook

    def run(self, audio):
        import torch

        self._spent = {}
        t0 = time.perf_counter()
        with torch.inference_mode():
            hyps = self.model.transcribe([audio], batch_size=1, return_hypotheses=True, verbose=False)
        wall = time.perf_counter() - t0
        pre, enc = self._spent.get("preprocess", 0.0), self._spent.get("encode", 0.0)
        # "decode": the rest of transcribe(), NeMo's greedy TDT decoding and its per-call data loading
        self.last_stages = {"preprocess": pre, "encode": enc, "decode": wall - pre - enc}
        hyp = hyps[0][0] if isinstance(hyps, tuple) else hyps[0]
        seq = hyp.y_sequence
        return [int(t) for t in (seq.tolist() if hasattr(seq, "tolist") else seq)]


class PteSystem:
    def __init__(self, pte: str, tokenizer: str, threads: int):
        # As parakeet-transcribe does: the work is on ExecuTorch's pool, and torch's OpenMP workers, spinning after
        # each input copy, would take a core from it.
        set_threads(threads, torch_threads=1)
        from parakeet_executorch.runtime.pte_model import PteModel
        from parakeet_executorch.runtime.transcribe import Transcriber
        from parakeet_executorch.tokenizer import Tokenizer

        self.transcriber = Transcriber(PteModel(pte), Tokenizer(tokenizer))
        from fpa_lowbit import executorch_kernels

        # PteModel loads fpa_lowbit's ExecuTorch kernels for fpa4w programs: then each run also reports the seconds
        # spent inside them (nearly all in the encoder).
        self._lowbit = executorch_kernels if executorch_kernels.is_loaded() else None
        self._encoder_kernel_s = 0.0
        if self._lowbit:
            # fpa4w programs spend nearly all kernel time in the encoder, fpa8w decoders all of it in the greedy loop:
            # the encoder's calls are read apart.
            model, encoder = self.transcriber.model, self.transcriber.model.encoder

            def timed_encoder(*args, **kwargs):
                before = self._lowbit.kernel_stats()[0]
                out = encoder(*args, **kwargs)
                self._encoder_kernel_s += self._lowbit.kernel_stats()[0] - before
                return out

            model.encoder = timed_encoder

    def run(self, audio):
        if self._lowbit:
            self._lowbit.kernel_stats(reset=True)
            self._encoder_kernel_s = 0.0
        tokens, timings = self.transcriber.decode_tokens(audio)
        self.last_stages = dict(timings)  # preprocess / encode / decode seconds, for the per-method profile
        if self._lowbit:
            self.last_stages["lowbit_kernel"] = self._encoder_kernel_s
            self.last_stages["lowbit_kernel_loop"] = self._lowbit.kernel_stats()[0] - self._encoder_kernel_s
        return [t.id for t in tokens]


class OrtSystem:
    def __init__(self, onnx_dir: str, variant: str, threads: int):
        from ort_tdt import OrtTdt

        self.model = OrtTdt(onnx_dir, variant, threads)

    def run(self, audio):
        tokens = self.model.transcribe(audio)
        self.last_stages = dict(self.model.last_stages)
        return tokens


def serve(kind: str, args: list[str]) -> int:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(obj):
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    import numpy as np

    t0 = time.perf_counter()
    try:
        if kind == "nemo":
            system = NemoSystem(args[0], int(args[1]))
        elif kind == "pte":
            system = PteSystem(args[0], args[1], int(args[2]))
        elif kind == "ort":
            system = OrtSystem(args[0], args[1], int(args[2]))
        else:
            raise ValueError(f"unknown kind {kind}")
    except Exception as exc:
        send({"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    send({"ready": True, "load_s": time.perf_counter() - t0, "load_vmhwm_kb": vmhwm_kb()})
    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "exit":
            send({"vmhwm_kb": vmhwm_kb()})
            return 0
        audio = np.load(req["audio"])
        try:
            t0 = time.perf_counter()
            tokens = system.run(audio)
            reply = {"tokens": tokens, "wall_s": time.perf_counter() - t0}
            if getattr(system, "last_stages", None):
                reply["stages"] = system.last_stages
            send(reply)
        except Exception as exc:
            send({"error": f"{type(exc).__name__}: {exc}"})
    return 0


# ---------------------------------------------------------------------------------------------------------------
# one-shot steps


def _token_counter(model, audio):
    """A function ``blank_bias -> number of tokens`` that NeMo's modules emit on ``audio`` with ``blank_bias``
    added to blank's logit (greedy TDT, batch 1; the encoder runs once)."""
    import torch

    from parakeet_executorch.decoding.tdt_greedy import greedy_tdt_decode

    blank = model.decoder.blank_idx
    durations = list(model.cfg.decoding.durations)
    n_dur = len(durations)
    max_symbols = model.cfg.decoding.greedy.get("max_symbols", 10)
    with torch.inference_mode():
        sig = torch.from_numpy(audio)[None]
        enc, enc_len = model.forward(input_signal=sig, input_signal_length=torch.tensor([sig.shape[1]]))
        f = model.joint.project_encoder(enc.transpose(1, 2))  # [1, T, J]
    num_frames = int(enc_len[0])

    def count(blank_bias: float) -> int:
        def predict(label, state):
            g, state = model.decoder.predict(torch.tensor([[label]]), state, add_sos=False, batch_size=1)
            return model.joint.project_prednet(g), state

        def joint(t, g):
            out = model.joint.joint_after_projection(f[:, t : t + 1], g)[0, 0, 0]
            logits = out[:-n_dur].clone()
            logits[blank] += blank_bias
            return int(logits.argmax()), int(out[-n_dur:].argmax())

        with torch.inference_mode():
            return len(greedy_tdt_decode(num_frames, joint, predict, None, blank, durations, max_symbols))

    return count


def prepare(base: str, out: str, audio_npy: str, target_rate: float, fixed_bias: str, report: str) -> int:
    """Tune an extra blank-logit bias so that the model emits ``target_rate`` tokens per audio second on the
    benchmark audio (bisection), add it to the joint's output bias, save ``out``. ``fixed_bias`` (a number) skips
    the search; ``none`` keeps the model as built."""
    import logging

    import numpy as np
    import torch
    from nemo.collections.asr.models import ASRModel
    from nemo.utils import logging as nemo_logging

    nemo_logging.setLevel(logging.ERROR)
    if base.startswith("build:"):  # build:SIZE:SEED -- parakeet-make-test-model's build, in this process
        import tempfile

        from parakeet_executorch.testing.make_model import build_model

        _, size, seed = base.split(":")
        work = tempfile.TemporaryDirectory()
        model = build_model(size, int(seed), work.name)  # the tokenizer folder must outlive save_to below
    else:
        model = ASRModel.restore_from(base, map_location="cpu")
    model.eval()
    audio = np.load(audio_npy)
    seconds = audio.shape[0] / 16000
    count = _token_counter(model, audio)
    before = count(0.0)
    if fixed_bias == "none":
        bias = 0.0
    elif fixed_bias != "auto":
        bias = float(fixed_bias)
    else:
        lo, hi = 0.0, 1.0
        while count(hi) / seconds > target_rate and hi < 1e4:
            lo, hi = hi, hi * 4
        for _ in range(8):
            mid = (lo + hi) / 2
            if count(mid) / seconds > target_rate:
                lo = mid
            else:
                hi = mid
        bias = hi if before / seconds > target_rate else 0.0
    with torch.no_grad():
        model.joint.joint_net[-1].bias[model.decoder.blank_idx] += bias
    after = _token_counter(model, audio)(0.0)
    tmp = out + ".partial"
    model.save_to(tmp)
    os.replace(tmp, out)
    Path(report).write_text(
        json.dumps(
            {
                "blank_bias": bias,
                "tune_audio_s": seconds,
                "target_tokens_per_s": target_rate,
                "tokens_per_s_before": before / seconds,
                "tokens_per_s_after": after / seconds,
                "parameters": sum(p.numel() for p in model.parameters()),
            }
        )
    )
    return 0


def onnx_export(nemo: str, out_dir: str, check_npy: str) -> int:
    """NeMo's own ONNX export (encoder + decoder_joint) plus the featurizer's constants for the numpy front end;
    checks the numpy features against NeMo's preprocessor on ``check_npy``."""
    import logging

    import numpy as np
    import torch
    from nemo.collections.asr.models import ASRModel
    from nemo.utils import logging as nemo_logging
    from ort_tdt import featurize

    nemo_logging.setLevel(logging.ERROR)
    model = ASRModel.restore_from(nemo, map_location="cpu")
    model.eval()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.export(str(out / "model.onnx"))
    fz = model.preprocessor.featurizer
    window = fz.window.detach().numpy().astype(np.float32)
    fb = fz.fb.detach()[0].numpy().astype(np.float32)
    meta = {
        "n_fft": int(fz.n_fft),
        "hop": int(fz.hop_length),
        "preemph": float(fz.preemph or 0.0),
        "log_guard": float(2**-24),
        "blank_id": int(model.decoder.blank_idx),
        "durations": [int(d) for d in model.cfg.decoding.durations],
        "max_symbols": int(model.cfg.decoding.greedy.get("max_symbols", 10)),
        "pred_layers": int(model.decoder.pred_rnn_layers),
        "pred_hidden": int(model.decoder.pred_hidden),
    }
    np.savez(out / "frontend.npz", window=window, fb=fb)
    (out / "meta.json").write_text(json.dumps(meta))
    audio = np.load(check_npy)
    with torch.inference_mode():
        ref, ref_len = model.preprocessor(
            input_signal=torch.from_numpy(audio)[None], length=torch.tensor([audio.shape[0]])
        )
    mine, mine_len = featurize(audio, window, fb, meta)
    diff = float(np.abs(ref[0, :, : int(ref_len[0])].numpy() - mine[0, :, :mine_len]).max())
    meta["frontend_max_abs_diff_vs_nemo"] = diff
    meta["frontend_frames_equal"] = int(ref_len[0]) == mine_len
    (out / "meta.json").write_text(json.dumps(meta))
    print(f"numpy front end vs NeMo preprocessor: max |diff| {diff:.2e}, frames {mine_len} vs {int(ref_len[0])}")
    return 0


def onnx_quantize(src_dir: str, dst_dir: str) -> int:
    """onnxruntime dynamic int8 quantization of both graphs (what onnx-asr / sherpa-onnx int8 models are)."""
    import shutil

    from onnxruntime.quantization import QuantType, quantize_dynamic

    src, dst = Path(src_dir), Path(dst_dir)
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("encoder-model.onnx", "decoder_joint-model.onnx"):
        # MatMul/Gemm only: onnxruntime's CPU provider has no ConvInteger kernel for int8 weights, and the
        # subsampling convolutions are a small share of the work.
        quantize_dynamic(
            str(src / name),
            str(dst / name),
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul", "Gemm"],
            use_external_data_format=name.startswith("encoder"),
        )
    for name in ("frontend.npz", "meta.json"):
        shutil.copy(src / name, dst / name)
    return 0


def export_step(model: str | Path, options) -> list[str]:
    """The command that runs ``export_pte(model, options)`` in a child process (``options``: ``ExportOptions``)."""
    from dataclasses import asdict

    fields = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(options).items()}
    return [sys.executable, str(Path(__file__).resolve()), "export", str(model), json.dumps(fields)]


def export(model: str, options_json: str) -> int:
    """``export_pte`` with progress on stdout; 0, or 1 with the error on stderr."""
    from parakeet_executorch.export.api import ExportOptions, export_pte

    try:
        report = export_pte(model, ExportOptions(**json.loads(options_json)), progress=lambda s: print(s, flush=True))
    except Exception as exc:
        print(f"export failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {report.pte_path} ({report.pte_bytes / 1e6:.1f} MB)", flush=True)
    return 0


def main(argv: list[str]) -> int:
    cmd, rest = argv[0], argv[1:]
    if cmd == "export":
        return export(*rest)
    if cmd == "serve":
        return serve(rest[0], rest[1:])
    if cmd == "prepare":
        return prepare(rest[0], rest[1], rest[2], float(rest[3]), rest[4], rest[5])
    if cmd == "onnx-export":
        return onnx_export(*rest)
    if cmd == "onnx-quantize":
        return onnx_quantize(*rest)
    raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
