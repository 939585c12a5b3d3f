"""NVIDIA Parakeet TDT speech recognition with ExecuTorch: export a NeMo checkpoint to one .pte, transcribe with it.

Transcription (needs only the .pte and its tokenizer, no NeMo):

>>> import parakeet_executorch as pe
>>> model = pe.load_model("out/model.pte")              # doctest: +SKIP
>>> result = model.transcribe("speech.wav")             # doctest: +SKIP
>>> result.text, [(w.text, w.start, w.end) for w in result.words]  # doctest: +SKIP
>>> pe.transcribe("out/model.pte", "speech.wav").text   # doctest: +SKIP

CPU threads (ExecuTorch's thread pool, default one per core): ``pe.set_cpu_threads(4)`` before transcribing.

Export (needs NeMo): ``pe.export_pte("model.nemo", pe.ExportOptions(quantize="8da4w", output_dir="out"))``.

Importing the package imports nothing heavy; each name below loads its module when first used.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "ExportOptions",
    "ExportReport",
    "LongFormOptions",
    "Transcriber",
    "Transcript",
    "export_pte",
    "load_model",
    "set_cpu_threads",
    "transcribe",
]

_LAZY = {
    "Transcriber": "runtime.transcribe",
    "Transcript": "runtime.transcribe",
    "LongFormOptions": "runtime.longform",
    "ExportOptions": "export.api",
    "export_pte": "export.api",
    "ExportReport": "export.report",
    "set_cpu_threads": "runtime.threads",
}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))


def load_model(
    path: str | Path,
    tokenizer: str | Path | None = None,
    *,
    check_fingerprint: bool = True,
    runtime: str = "auto",
):
    """Load an exported ``model.pte`` for transcription (``runtime.transcribe.Transcriber.from_pte``).

    Args:
        path: a ``model.pte`` written by ``parakeet-export`` / ``export_pte``.
        tokenizer: its ``tokenizer.model`` (default: the one next to ``path``).
        check_fingerprint: refuse a tokenizer other than the one the .pte was exported with (its SHA-256 is in the
            .pte); False checks only its size.
        runtime: ``"native"`` (the C interface of ``examples/parakeet/capi``, no torch in the process),
            ``"pybind"`` (ExecuTorch's Python bindings) or ``"auto"`` (native where it is built).
    Returns:
        a ``Transcriber``: ``.transcribe(audio_or_path, ...) -> Transcript``.
    Raises:
        PteModelError: the .pte is missing, not an ExecuTorch program, or lacks a method.
        TokenizerError: the tokenizer is missing, of another size, or another export's.
    """
    from .runtime.transcribe import Transcriber

    return Transcriber.from_pte(path, tokenizer, check_fingerprint=check_fingerprint, runtime=runtime)


def transcribe(model: str | Path, audio, **options):
    """Load ``model`` (a .pte path, or a ``Transcriber`` already loaded) and transcribe ``audio`` with it.

    Args:
        model: the .pte path (its ``tokenizer.model`` next to it), or a ``Transcriber``.
        audio: an audio file path, or a float32 mono waveform [samples].
        options: passed to ``Transcriber.transcribe`` (``sample_rate``, ``long_form``, ``non_finite``).
    Returns:
        the ``Transcript``: ``.text``, ``.tokens`` / ``.words`` / ``.segments`` spans with ``start``/``end`` seconds.
    Raises:
        what ``load_model`` and ``Transcriber.transcribe`` raise.
    """
    transcriber = model if hasattr(model, "transcribe") else load_model(model)
    return transcriber.transcribe(audio, **options)
