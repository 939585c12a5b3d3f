"""Live transcription for ``parakeet-transcribe --stream -`` (raw PCM on stdin) and ``--mic`` (sounddevice).

Text is printed as each chunk is decided: txt appends the final text to stdout (and, with ``--partial``, shows
the draft of the right context on stderr); jsonl prints one object per decoded chunk. End of input flushes the
last partial chunk; an input that closes at once gives an empty transcript and exit 0.
"""

from __future__ import annotations

import json
import queue
import sys
from collections.abc import Iterator

import numpy as np

from ..audio import AudioError
from .streaming import StreamingTranscriber, StreamResult


def run_live(transcriber, args, options, timestamps: str) -> int:
    """Transcribe ``--stream -`` or ``--mic`` input until it ends (EOF, or Ctrl-C for the microphone).

    Returns the exit code. Raises ``AudioError`` for malformed PCM, ``ContextError`` for bad context sizes.
    """
    from ..audio_stream import read_pcm_blocks, stdin_binary
    from .longform import context_frames

    context = context_frames(transcriber, options)
    rate = transcriber.model.metadata.sample_rate
    stream = StreamingTranscriber(transcriber, context, partial=args.partial)
    if args.mic:
        blocks = microphone_blocks(args.stream_rate, args.stream_channels, rate)
    else:
        blocks = read_pcm_blocks(stdin_binary(), args.stream_rate, args.stream_channels, rate)
    printer = _Printer(args.format, args.partial, timestamps)
    try:
        for block in blocks:
            printer.show(stream.feed(block))
    except KeyboardInterrupt:
        pass  # the microphone's way to end: flush what was heard
    printer.show(stream.finish(), last=True)
    return 0


class _Printer:
    def __init__(self, fmt: str, partial: bool, timestamps: str):
        self.fmt, self.partial, self.timestamps = fmt, partial, timestamps
        self.start = 0.0
        self.printed_any = False

    def show(self, result: StreamResult, last: bool = False) -> None:
        if self.fmt == "jsonl":
            if result.tokens or result.final_until > self.start or last:
                obj = {
                    "start": round(self.start, 3),
                    "end": round(result.final_until, 3),
                    "text": result.text,
                    "final": True,
                }
                if self.timestamps in ("token", "all"):
                    obj["tokens"] = [
                        {"id": s.id, "text": s.text, "start": s.start, "end": s.end} for s in result.tokens
                    ]
                if self.partial:
                    obj["draft"] = result.draft_text
                print(json.dumps(obj, ensure_ascii=False), flush=True)
                self.start = result.final_until
            return
        text = result.text.lstrip() if not self.printed_any else result.text
        if text:
            sys.stdout.write(text)
            self.printed_any = True
        if last:
            sys.stdout.write("\n")
        sys.stdout.flush()
        if self.partial and sys.stderr.isatty():
            sys.stderr.write("\r\x1b[K" + ("" if last else f"[draft] {result.draft_text.strip()}"))
            sys.stderr.flush()


def microphone_blocks(
    device_rate: int, channels: int, sample_rate: int, block_seconds: float = 0.1
) -> Iterator[np.ndarray]:
    """Record float32 blocks from the default input device with sounddevice (PortAudio), as mono at
    ``sample_rate``. Runs until interrupted (Ctrl-C).

    Raises:
        AudioError: sounddevice or PortAudio is missing, or no input device can be opened.
    """
    try:
        import sounddevice as sd
    except (ImportError, OSError) as exc:
        raise AudioError(
            f"--mic needs the sounddevice package and PortAudio ({exc}): pip install sounddevice; "
            "apt install libportaudio2 (Debian/Ubuntu) or brew install portaudio (macOS)"
        ) from exc
    from ..audio import to_mono
    from ..audio_stream import StreamResampler

    resample = StreamResampler(device_rate, sample_rate)
    blocks: queue.Queue = queue.Queue()

    def callback(indata, _frames, _time, _status):
        blocks.put(indata.copy())

    try:
        with sd.InputStream(
            samplerate=device_rate,
            channels=channels,
            dtype="float32",
            blocksize=int(device_rate * block_seconds),
            callback=callback,
        ):
            print("recording from the default input device; Ctrl-C to stop", file=sys.stderr)
            while True:
                yield resample(to_mono(blocks.get()), last=False)
    except sd.PortAudioError as exc:
        raise AudioError(f"cannot record from the default input device: {exc}") from exc
