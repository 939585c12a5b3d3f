"""Parakeet TDT on ONNX Runtime the way onnx-asr / sherpa-onnx users run it: NeMo's own ONNX export
(``encoder-model.onnx`` + ``decoder_joint-model.onnx``), a numpy log-mel front end, and a greedy TDT loop that
calls decoder_joint once per step (prediction network + joint in one graph; its new LSTM state is kept only when
a token is emitted). The loop's rules are ``parakeet_executorch.decoding.tdt_greedy.greedy_tdt_decode``.

No torch import here: the process's peak RSS is onnxruntime's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np


def featurize(audio: np.ndarray, window: np.ndarray, fb: np.ndarray, meta: dict) -> tuple[np.ndarray, int]:
    """NeMo's AudioToMelSpectrogramPreprocessor (inference) in numpy: preemphasis, centred zero-padded STFT,
    power, mel, log(x + 2^-24), per-feature normalisation over valid frames. Returns ([1, F, T], valid frames)."""
    n_fft, hop = meta["n_fft"], meta["hop"]
    x = audio.astype(np.float32)
    n = x.shape[0]
    if meta["preemph"]:
        x = np.concatenate([x[:1], x[1:] - meta["preemph"] * x[:-1]])
    valid = n // hop
    win = np.zeros(n_fft, dtype=np.float32)
    off = (n_fft - window.shape[0]) // 2
    win[off : off + window.shape[0]] = window
    padded = np.pad(x, (n_fft // 2, n_fft // 2))
    n_frames = 1 + (padded.shape[0] - n_fft) // hop
    idx = np.arange(n_fft)[None, :] + hop * np.arange(n_frames)[:, None]
    spec = np.fft.rfft(padded[idx] * win, n=n_fft, axis=1)
    power = (spec.real.astype(np.float32) ** 2 + spec.imag.astype(np.float32) ** 2).T  # [bins, T]
    mel = np.log(fb @ power + np.float32(meta["log_guard"]))
    v = mel[:, :valid]
    mean = v.mean(axis=1, keepdims=True)
    std = np.sqrt(((v - mean) ** 2).sum(axis=1, keepdims=True) / max(valid - 1, 1)) + np.float32(1e-5)
    out = np.zeros_like(mel)
    out[:, :valid] = (v - mean) / std
    return out[None].astype(np.float32), valid


class OrtTdt:
    """Args: onnx_dir: folder written by bench's onnx-export step; variant: label only; threads: intra-op threads."""

    def __init__(self, onnx_dir: str | Path, variant: str = "fp32", threads: int = 1):
        import onnxruntime as ort

        d = Path(onnx_dir)
        self.meta = json.loads((d / "meta.json").read_text())
        fe = np.load(d / "frontend.npz")
        self.window, self.fb = fe["window"], fe["fb"]
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        providers = ["CPUExecutionProvider"]
        self.encoder = ort.InferenceSession(str(d / "encoder-model.onnx"), opts, providers=providers)
        self.decoder = ort.InferenceSession(str(d / "decoder_joint-model.onnx"), opts, providers=providers)
        self.variant = variant
        self.last_stages: dict[str, float] = {}

    def transcribe(self, audio: np.ndarray) -> list[int]:
        from parakeet_executorch.decoding.tdt_greedy import greedy_tdt_decode

        m = self.meta
        t0 = time.perf_counter()
        features, valid = featurize(audio, self.window, self.fb, m)
        t1 = time.perf_counter()
        enc, enc_len = self.encoder.run(None, {"audio_signal": features, "length": np.array([valid], np.int64)})
        t2 = time.perf_counter()
        num_frames = int(enc_len[0])
        shape = (m["pred_layers"], 1, m["pred_hidden"])
        zeros = (np.zeros(shape, np.float32), np.zeros(shape, np.float32))
        n_dur = len(m["durations"])
        one = np.array([1], np.int32)

        # A "prediction" is (label, LSTM state before label, slot for the state after label). decoder_joint computes
        # the state after label on every call; the first call on a prediction stores it for the next predict().
        def predict(label, prev):
            state_in = zeros if prev is None else prev[2][0]
            p = (label, state_in, [None])
            return p, p

        def joint(t, p):
            label, (h, c), slot = p
            out, _, h2, c2 = self.decoder.run(
                None,
                {
                    "encoder_outputs": enc[:, :, t : t + 1],
                    "targets": np.array([[label]], np.int32),
                    "target_length": one,
                    "input_states_1": h,
                    "input_states_2": c,
                },
            )
            if slot[0] is None:
                slot[0] = (h2, c2)
            logits = out[0, 0, 0]
            return int(logits[:-n_dur].argmax()), int(logits[-n_dur:].argmax())

        tokens = greedy_tdt_decode(num_frames, joint, predict, None, m["blank_id"], m["durations"], m["max_symbols"])
        # seconds of the last call: numpy front end, encoder session, greedy loop over decoder_joint
        self.last_stages = {"preprocess": t1 - t0, "encode": t2 - t1, "decode": time.perf_counter() - t2}
        return [t.id for t in tokens]
