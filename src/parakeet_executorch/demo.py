"""``parakeet-demo``: the main job end to end on a bundled default, with nothing downloaded.

Builds the ``tiny`` random-weight test model (or takes ``--model``), exports it to XNNPACK, and transcribes a clip
with the Python runner, printing token timestamps. With random weights the words are meaningless; the point is that
every stage runs, and the runner's tokens can be checked against NeMo (``--check``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_AUDIO = Path("../shared/audio/jfk.wav")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="parakeet-demo", description=__doc__.splitlines()[0])
    p.add_argument("--model", help=".nemo or Hugging Face id (default: build the tiny test model)")
    p.add_argument("--audio", default=str(DEFAULT_AUDIO), help=f"clip to transcribe (default {DEFAULT_AUDIO})")
    p.add_argument("--backend", default="xnnpack", choices=("portable", "xnnpack"))
    p.add_argument("--out", default="artifacts/demo", help="working folder for the .nemo and the export")
    p.add_argument("--check", action="store_true", help="also run NeMo's transcribe() and compare tokens")
    args = p.parse_args(argv)

    audio = Path(args.audio)
    if not audio.is_file():
        p.error(f"audio clip {audio} not found; pass --audio PATH (any WAV/FLAC/OGG/MP3)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = args.model
    if model is None:
        from .testing.make_model import main as make_model

        model = str(out / "tiny.nemo")
        if not Path(model).is_file():
            make_model(["--size", "tiny", "--out", model])
        print("note: the tiny test model has random weights, so its words are meaningless", file=sys.stderr)

    from .export.cli import main as export_main

    export_dir = out / args.backend
    if export_main(["--model", model, "--backend", args.backend, "--output-dir", str(export_dir)]) != 0:
        return 2
    from .runtime.cli import main as transcribe_main

    rc = transcribe_main(["--model", str(export_dir / "model.pte"), "--timestamps", "word", str(audio)])
    if rc != 0 or not args.check:
        return rc
    return _check_against_nemo(model, export_dir, audio)


def _check_against_nemo(model: str, export_dir: Path, audio: Path) -> int:
    from .audio import load_audio
    from .export.load import load_nemo_model
    from .runtime.pte_model import PteModel
    from .runtime.transcribe import Transcriber
    from .tokenizer import Tokenizer

    transcriber = Transcriber(PteModel(export_dir / "model.pte"), Tokenizer(export_dir / "tokenizer.model"))
    ours = [t.id for t in transcriber.transcribe(load_audio(audio, transcriber.model.metadata.sample_rate)).tokens]
    hyp = load_nemo_model(model).transcribe([str(audio)], batch_size=1, verbose=False)[0]
    ref = [int(i) for i in hyp.y_sequence]
    same = ours == ref
    print(f"NeMo check: {len(ours)} tokens from the .pte, {len(ref)} from NeMo: {'identical' if same else 'DIFFERENT'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
