"""Buffered left | chunk | right decoding: token-exact with NeMo's own buffered decoding, equal to the single pass
when the audio fits one window, independent of how the input is cut into blocks, and the CLI's long and live paths."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from nemo_reference import nemo_buffered_tokens
from parakeet_executorch.export.api import DEFAULT_MAX_AUDIO_SECONDS
from parakeet_executorch.runtime.buffered import (
    BufferedDecoder,
    ContextError,
    ContextSize,
    SampleBuffer,
    transcribe_buffered,
)

from conftest import SAMPLE_RATE, export_tiny, make_transcriber


def blocks_of(audio: np.ndarray, size: int):
    return [audio[i : i + size] for i in range(0, len(audio), size)]


def raw_tokens(transcriber, audio, context, block=7000, decode_partial_frame=False):
    decoder = BufferedDecoder(transcriber, context, decode_partial_frame=decode_partial_frame)
    tokens = []
    for b in blocks_of(audio, block):
        tokens += decoder.feed(b).tokens
    tokens += decoder.finish().tokens
    return [(t.id, t.frame) for t in tokens], decoder


@pytest.fixture(scope="module")
def long_jfk(jfk_audio) -> np.ndarray:
    """jfk.wav six times with a little silence between: 68 s, past the default .pte's bound."""
    gap = np.zeros(int(0.37 * SAMPLE_RATE), np.float32)
    return np.concatenate([np.concatenate([jfk_audio, gap])] * 6)


@pytest.mark.parametrize(
    "context",
    [ContextSize(10, 25, 5), ContextSize(2, 5, 2), ContextSize(0, 1, 1)],
    ids=["l10-c25-r5", "l2-c5-r2", "l0-c1-r1"],
)
def test_tokens_equal_nemo_buffered_decoding(transcriber_xnnpack, nemo_model, long_jfk, context):
    audio = long_jfk if context.chunk > 1 else long_jfk[: 20 * SAMPLE_RATE]  # NeMo's step per frame is slow
    ours, decoder = raw_tokens(transcriber_xnnpack, audio, context)
    ref = nemo_buffered_tokens(nemo_model, audio, context.left, context.chunk, context.right)
    assert decoder.num_windows > 2 and len(ref) > 50
    assert ours == ref


def test_several_minutes_equal_nemo(transcriber_xnnpack, nemo_model, long_jfk):
    audio = np.concatenate([long_jfk] * 3)  # 3.4 min
    context = ContextSize(25, 125, 25)  # 2 s | 10 s | 2 s
    ours, _ = raw_tokens(transcriber_xnnpack, audio, context, block=48000)
    assert ours == nemo_buffered_tokens(nemo_model, audio, context.left, context.chunk, context.right)
    frames = [f for _, f in ours]
    assert frames == sorted(frames) and frames[-1] <= len(audio) / (160 * 8) + 1


def test_demo_model_equals_nemo_buffered(demo_nemo, export_root, heldout_speech):
    from parakeet_executorch.export.load import load_nemo_model

    audio = np.concatenate([heldout_speech[0]] * 4)  # ~2.7 min of held-out speech
    transcriber = make_transcriber(export_tiny(demo_nemo, export_root, "xnnpack"))
    nemo = load_nemo_model(str(demo_nemo))
    for context in (ContextSize(50, 100, 25), ContextSize(25, 25, 25)):
        ours, _ = raw_tokens(transcriber, audio, context)
        ref = nemo_buffered_tokens(nemo, audio, context.left, context.chunk, context.right)
        assert len(ref) > 200 and ours == ref


def test_one_window_gives_the_single_pass_result(transcriber_xnnpack, jfk_audio):
    single = transcriber_xnnpack.transcribe(jfk_audio)
    buffered = transcribe_buffered(transcriber_xnnpack, blocks_of(jfk_audio, 5000), ContextSize(10, 125, 25))
    assert [(s.id, s.start, s.end) for s in buffered.tokens] == [(s.id, s.start, s.end) for s in single.tokens]
    assert buffered.text == single.text and buffered.timings["windows"] == 1


def test_final_partial_frame_is_decoded_only_on_request(transcriber_xnnpack, long_jfk):
    context = ContextSize(10, 25, 5)
    nemo_like, _ = raw_tokens(transcriber_xnnpack, long_jfk, context, decode_partial_frame=False)
    ours, _ = raw_tokens(transcriber_xnnpack, long_jfk, context, decode_partial_frame=True)
    assert ours[: len(nemo_like)] == nemo_like  # the extra frame only adds at the end


@pytest.mark.parametrize("block", [1, 999, 16000, 10**7])
def test_block_sizes_do_not_change_the_tokens(transcriber_xnnpack, long_jfk, block):
    audio = long_jfk[: 25 * SAMPLE_RATE]
    reference, _ = raw_tokens(transcriber_xnnpack, audio, ContextSize(5, 20, 5), block=10**8)
    got, decoder = raw_tokens(transcriber_xnnpack, audio, ContextSize(5, 20, 5), block=block)
    assert got == reference
    assert decoder._buffer.data.size == 0  # released at the end


def test_memory_is_bounded_by_one_window(transcriber_xnnpack, long_jfk, monkeypatch):
    """The samples held never exceed one window plus the block being fed, and each window reaches the encoder as
    a view of that one buffer (no window-sized copy), the last one zero-padded in place."""
    context = ContextSize(5, 20, 5)
    decoder = BufferedDecoder(transcriber_xnnpack, context)
    hop = transcriber_xnnpack.model.metadata.hop_length
    encode = transcriber_xnnpack.encode
    windows = []

    def spy(audio, valid_samples=None):
        windows.append((np.shares_memory(audio, decoder._buffer.data), audio.shape[0], valid_samples))
        return encode(audio, valid_samples)

    monkeypatch.setattr(transcriber_xnnpack, "encode", spy)
    biggest = 0
    for b in blocks_of(long_jfk[: long_jfk.shape[0] - 123], 4000):
        decoder.feed(b)
        biggest = max(biggest, decoder._buffer.data.size)
    decoder.finish()
    assert biggest <= decoder.window_samples + 4000
    assert len(windows) > 3
    assert all(shared and length % hop == 0 for shared, length, _ in windows)
    # A last window reaches back a whole window; only a stream shorter than one window ends mid-hop.
    windows.clear()
    decoder = BufferedDecoder(transcriber_xnnpack, context)
    short = decoder.window_samples - 3 * decoder.frame_samples - 123  # past the first window's end, not a window
    for b in blocks_of(long_jfk[:short], 4000):
        decoder.feed(b)
    decoder.finish()
    assert len(windows) == 2 and windows[-1][2] == short and short % hop != 0
    assert all(shared and length % hop == 0 for shared, length, _ in windows)  # padded in the buffer, not copied


def test_sample_buffer_keeps_what_a_concatenation_would():
    """SampleBuffer against the whole stream concatenated: random block sizes (1 sample to 3 windows), random drops,
    views (some zero-padded) read back; its array never exceeds what it keeps plus the largest block."""
    rng = np.random.default_rng(0)
    window = 1000
    buf = SampleBuffer(window + 7)
    stream = np.zeros(0, np.float32)
    largest = 0
    for _ in range(400):
        n = int(rng.choice([1, 2, 50, 333, 999, 3000]))
        block = rng.standard_normal(n).astype(np.float32)
        buf.drop_before(stream.shape[0] - window)
        buf.append(block)
        stream = np.concatenate([stream, block])
        largest = max(largest, n)
        assert buf.end == stream.shape[0] and buf.start == max(0, stream.shape[0] - window - n)
        assert buf.data.size <= window + 7 + largest
        a = int(rng.integers(buf.start, buf.end + 1))
        b = int(rng.integers(a, buf.end + 1))
        assert np.array_equal(buf.view(a, b), stream[a:b])
    a = buf.end - 10
    padded = buf.view(a, buf.end, zero_pad_to=64)
    assert np.array_equal(padded[:10], stream[a:]) and not padded[10:].any() and padded.shape == (64,)
    with pytest.raises(ValueError, match="not all kept"):
        buf.view(buf.start - 1, buf.end)


def test_context_errors(transcriber_xnnpack):
    with pytest.raises(ContextError, match="shorter than one encoder frame"):
        ContextSize.from_seconds(1, 0.05, 1, 0.01, 8)
    with pytest.raises(ContextError, match="non-negative"):
        ContextSize.from_seconds(-1, 2, 1, 0.01, 8)
    with pytest.raises(ContextError, match=f"longer than this model.pte's {DEFAULT_MAX_AUDIO_SECONDS:.2f} s"):
        BufferedDecoder(transcriber_xnnpack, ContextSize.from_seconds(30, 30, 5, 0.01, 8))
    assert ContextSize.from_seconds(10, 1.6, 1.6, 0.01, 8) == ContextSize(125, 20, 20)  # NeMo's rounding


def test_file_reader_gives_the_loaded_waveform(jfk_path, clips_dir):
    from parakeet_executorch.audio import load_audio
    from parakeet_executorch.audio_stream import read_blocks

    same_rate = np.concatenate(list(read_blocks(jfk_path, SAMPLE_RATE, block_frames=5000)))
    assert np.array_equal(same_rate, load_audio(jfk_path, SAMPLE_RATE))
    stereo = clips_dir / "jfk_48k_stereo.wav"
    streamed = np.concatenate(list(read_blocks(stereo, SAMPLE_RATE, block_frames=30000)))
    whole = load_audio(stereo, SAMPLE_RATE)
    assert abs(len(streamed) - len(whole)) <= 1
    n = min(len(streamed), len(whole))
    assert np.abs(streamed[:n] - whole[:n]).max() < 1e-3  # libsoxr's streaming and one-shot filters agree


def cli(*args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "parakeet_executorch.runtime.cli", *args], input=stdin, capture_output=True, timeout=600
    )


@pytest.fixture(scope="module")
def long_wav(tmp_path_factory, long_jfk):
    import soundfile as sf

    path = tmp_path_factory.mktemp("long") / "long.wav"
    sf.write(str(path), long_jfk, SAMPLE_RATE, subtype="PCM_16")
    return path


def test_cli_transcribes_past_the_bound_and_stdin_matches(exported_xnnpack, long_wav):
    import soundfile as sf

    model = str(exported_xnnpack / "model.pte")
    flags = ["--chunk-seconds", "8", "--left-context-seconds", "4", "--right-context-seconds", "2"]
    files = cli("--model", model, str(long_wav), "--format", "json", "--quiet", *flags)
    assert files.returncode == 0, files.stderr.decode()[-2000:]
    result = json.loads(files.stdout)
    assert result["words"] and result["tokens"][-1]["end"] > 60
    starts = [t["start"] for t in result["tokens"]]
    assert starts == sorted(starts)
    pcm, _ = sf.read(str(long_wav), dtype="int16")
    live = cli("--model", model, "--stream", "-", "--format", "jsonl", *flags, stdin=pcm.tobytes())
    assert live.returncode == 0, live.stderr.decode()[-2000:]
    chunks = [json.loads(line) for line in live.stdout.decode().splitlines()]
    assert len(chunks) >= 7 and all(c["final"] for c in chunks)
    assert [t["id"] for c in chunks for t in c["tokens"]] == [t["id"] for t in result["tokens"]]
    assert "".join(c["text"] for c in chunks).strip() == result["text"]


@pytest.mark.parametrize(
    "stdin, flags, message",
    [
        (b"", [], None),
        (b"RIFF\x00\x00\x00\x00WAVEfmt ", [], "holds a WAV file, not raw PCM"),
        (b"\x01\x02\x03", [], "ended inside a frame"),
        (b"\x00" * 64, ["--chunk-seconds", "0.01"], "shorter than one encoder frame"),
        (b"\x00" * 64, ["--right-context-seconds", "-1"], "non-negative"),
        (b"\x00" * 64, ["--left-context-seconds", "70"], "longer than this model.pte's"),
    ],
)
def test_cli_stream_edge_cases(exported_xnnpack, stdin, flags, message):
    proc = cli("--model", str(exported_xnnpack / "model.pte"), "--stream", "-", *flags, stdin=stdin)
    err = proc.stderr.decode()
    if message is None:
        assert proc.returncode == 0 and proc.stdout.decode().strip() == "", err[-1000:]
    else:
        assert proc.returncode == 2 and message in err.splitlines()[-1]
        assert proc.stdout == b""


def test_cli_usage_errors(exported_xnnpack, long_wav):
    model = str(exported_xnnpack / "model.pte")
    for args, message in (
        (["--stream", "x.raw"], "--stream takes '-'"),
        ([str(long_wav), "--stream", "-"], "exclusive"),
        ([], "no input"),
        (["--stream", "-", "--format", "srt"], "needs the whole transcript"),
    ):
        proc = cli("--model", model, *args)
        assert proc.returncode == 2 and message in proc.stderr.decode()
    one_pass = cli("--model", model, str(long_wav), "--chunk-seconds", "0")
    assert one_pass.returncode == 2
    assert f"supports up to {DEFAULT_MAX_AUDIO_SECONDS:.2f} s in one pass" in one_pass.stderr.decode()
    assert one_pass.stdout == b""


@pytest.fixture(scope="module")
def exported_20s(tiny_nemo, export_root):
    """The tiny model exported for windows of at most 20 s (a smaller memory plan than the default 40 s)."""
    return export_tiny(tiny_nemo, export_root, "xnnpack", "--max-audio-seconds", "20")


def test_default_chunk_fills_the_bound(transcriber_xnnpack, exported_20s):
    from parakeet_executorch.runtime.longform import FILE_CONTEXT, LongFormOptions

    default = LongFormOptions(*FILE_CONTEXT)
    meta_default = transcriber_xnnpack.model.metadata  # the default bound
    meta20 = make_transcriber(exported_20s).model.metadata
    assert default.for_model(meta_default) == LongFormOptions(4.0, DEFAULT_MAX_AUDIO_SECONDS - 6.0, 2.0)
    assert default.for_model(meta20) == LongFormOptions(4.0, 14.0, 2.0)
    explicit = LongFormOptions(4.0, 8.0, 4.0)
    assert explicit.for_model(meta20) is explicit  # a chunk given is kept
    with pytest.raises(ValueError, match="for_model"):
        _ = default.window_seconds
    with pytest.raises(ContextError, match="at most 20.00 s, which leaves no chunk beside 10 s of left and 10 s"):
        LongFormOptions(10.0, None, 10.0).for_model(meta20)
    for left, right, flag in ((float("nan"), 2.0, "left"), (4.0, float("inf"), "right"), (-1.0, 2.0, "left")):
        with pytest.raises(ContextError, match=f"^--{flag}-context-seconds must be a non-negative number of seconds"):
            LongFormOptions(left, None, right).for_model(meta20)


def test_default_contexts_work_on_a_pte_with_a_smaller_bound(exported_20s, long_jfk):
    """A .pte exported with --max-audio-seconds 20 decodes a 68 s file with the defaults in 20 s windows, as the
    explicit 4 | 14 | 2 s; with the old fixed 56 s window it was refused."""
    from parakeet_executorch.runtime.longform import FILE_CONTEXT, LongFormOptions

    transcriber = make_transcriber(exported_20s)
    default = transcriber.transcribe(long_jfk, long_form=LongFormOptions(*FILE_CONTEXT))
    # 853 encoder frames need 5 windows with chunks of at most 175 frames; the default evens them out to 166.
    evened = ContextSize(50, 175, 25).evened(len(long_jfk), 1280)
    assert evened == ContextSize(50, 166, 25)
    explicit, decoder = raw_tokens(transcriber, long_jfk, evened, decode_partial_frame=True)
    assert [(t.id, t.start_offset) for t in default.tokens] == explicit
    assert decoder.num_windows == 5 and len(explicit) > 50 and default.timings["windows"] == 5
    given = transcriber.transcribe(long_jfk, long_form=LongFormOptions(4.0, 14.0, 2.0))  # a chunk given is kept
    assert [(t.id, t.start_offset) for t in given.tokens] == raw_tokens(
        transcriber, long_jfk, ContextSize(50, 175, 25), decode_partial_frame=True
    )[0]


def encoded_frames(context: ContextSize, frames: int) -> tuple[int, int]:
    """(windows, encoder frames encoded) of buffered decoding over ``frames`` frames, window by window as
    ``BufferedDecoder`` cuts them: the first window chunk + right, later ones left + chunk + right (the last one
    reaching back to fill the window), each at most ``frames`` long."""
    windows, encoded, end = 0, 0, context.chunk + context.right
    while frames > end:
        windows, encoded = windows + 1, encoded + min(end, context.total)
        end += context.chunk
    return windows + 1, encoded + min(frames, context.total)


@pytest.mark.parametrize("frames", [1, 2, 674, 675, 676, 700, 701, 1350, 1351, 7500, 8400, 45000])
def test_evened_chunk_keeps_the_windows_and_encodes_less(frames):
    """The evened chunk is never longer, needs the same number of windows, leaves a last chunk (beyond its right
    context) within one frame per window of the others, and never encodes more; at 10 minutes 666 s instead of
    716 s (4 | 54 | 2 s)."""
    default = ContextSize(50, 675, 25)
    evened = default.evened(frames * 1280 - 7, 1280)  # a partial last frame counts as a frame
    assert (evened.left, evened.right) == (50, 25) and 1 <= evened.chunk <= default.chunk
    windows, encoded = encoded_frames(evened, frames)
    assert windows == encoded_frames(default, frames)[0] and encoded <= encoded_frames(default, frames)[1]
    if windows > 1:
        last_chunk = frames - (windows - 1) * evened.chunk  # everything after the previous chunk
        assert evened.chunk - windows <= last_chunk - evened.right <= evened.chunk
    else:
        assert evened == default
    if frames == 7500:
        assert evened.chunk == 623
        assert encoded_frames(default, frames) == (12, 8950) and encoded_frames(evened, frames) == (12, 8326)
