"""NeMo's own greedy transcription, the reference every runner is compared with."""

from __future__ import annotations

import tempfile

import numpy as np
import torch


def nemo_transcribe(nemo_model, audio: np.ndarray) -> dict:
    """``ASRModel.transcribe(..., timestamps=True)`` of one 16 kHz waveform, flattened for comparison.

    The waveform goes through a float32 WAV file, the way users call transcribe(): NeMo's in-memory array path
    pads clips shorter than 1 s with silence on both sides (``pad_min_duration``), which changes the audio.

    Returns dict with ``ids``, ``text``, ``tokens`` [(start_offset, end_offset, start, end)], ``words`` and
    ``segments`` [(text, start_offset, end_offset, start, end)].
    """
    import soundfile as sf

    with tempfile.TemporaryDirectory() as d, torch.no_grad():
        path = f"{d}/audio.wav"
        sf.write(path, audio.astype(np.float32), 16000, subtype="FLOAT")
        hyp = nemo_model.transcribe([path], batch_size=1, timestamps=True, verbose=False)[0]
    # transcribe() ends by unfreezing encoder, decoder and joint, which puts them in training mode (dropout on).
    nemo_model.eval()
    ts = hyp.timestamp
    return {
        "ids": [int(i) for i in hyp.y_sequence],
        "text": hyp.text,
        "tokens": [(c["start_offset"], c["end_offset"], c["start"], c["end"]) for c in ts["char"]],
        "words": [(w["word"], w["start_offset"], w["end_offset"], w["start"], w["end"]) for w in ts["word"]],
        "segments": [(s["segment"], s["start_offset"], s["end_offset"], s["start"], s["end"]) for s in ts["segment"]],
    }


def runner_result(transcript) -> dict:
    """The same flattened view of a ``Transcript`` from this project's runner."""
    return {
        "ids": [s.id for s in transcript.tokens],
        "text": transcript.text,
        "tokens": [(s.start_offset, s.end_offset, s.start, s.end) for s in transcript.tokens],
        "words": [(s.text, s.start_offset, s.end_offset, s.start, s.end) for s in transcript.words],
        "segments": [(s.text, s.start_offset, s.end_offset, s.start, s.end) for s in transcript.segments],
    }


def assert_same_transcript(ours: dict, ref: dict) -> None:
    assert ours["ids"] == ref["ids"], "token ids differ from NeMo's"
    assert ours["tokens"] == ref["tokens"], "token timestamps differ from NeMo's"
    assert ours["text"] == ref["text"]
    assert ours["words"] == ref["words"]
    assert ours["segments"] == ref["segments"]


# NeMo's own buffered decoding, driven as its streaming script drives it (shared with parakeet-eval-wer).
from parakeet_executorch.training.nemo_buffered import nemo_buffered_tokens  # noqa: E402,F401
