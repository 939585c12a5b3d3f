"""Long-form and live transcription at full size: buffered decoding's RTFx and peak RSS against the single pass,
over 1, 10 and 60 minutes, through the Python and C++ runners, and the live path's token latency.

    python benchmarks/bench_longform.py --out /tmp/bench_longform                    # full size, 8da4w
    python benchmarks/bench_longform.py --size tiny --minutes 1 3 --out /tmp/lf_tiny  # a quick check

Steps: build the random-weight test model with a realistic token rate (``_bench_worker.py prepare``, as
``bench_transcribe.py`` does), export one recipe (default xnnpack 8da4w, ``--max-audio-seconds 60``), write
jfk.wav looped to 60 s and to each ``--minutes`` length, then run each transcription in a fresh process
(peak RSS from ``os.wait4``; RTFx = audio seconds / the runner's own wall time for the file, load excluded):

- single pass of a file as long as the export's bound (``--max-audio-seconds``, default 60 s; ``--chunk-seconds 0``),
  the reference speed;
- buffered decoding with the default contexts of each length, both runners;
- the live path at a low-latency setting: 30 s of the audio fed in real time, 0.1 s blocks, and for each token the
  delay from the arrival of the sample that ends it to the moment the token is returned (median and p95), beside the
  theoretical floor (chunk + right context).

Prints a table and writes results.json and results.md in --out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORKER = HERE / "_bench_worker.py"
JFK = Path(os.environ.get("PARAKEET_SHARED_AUDIO", REPO.parent / "shared" / "audio")) / "jfk.wav"
CPP_RUNNER = REPO / "cmake-out" / "examples" / "parakeet" / "parakeet_runner"
sys.path.insert(0, str(REPO / "src"))
from parakeet_executorch.export.recipe_registry import recipes_on  # noqa: E402 (light: no torch)

# name -> (backend, recipe): every recipe XNNPACK runs ("fp32" for none)
RECIPES = {("fp32" if r.name == "none" else r.name): ("xnnpack", r.name) for r in recipes_on("xnnpack")}
WALL = re.compile(r"wall: ([0-9.]+) s")
STAGES = re.compile(r"(preprocess|encode|decode): ([0-9.]+) s")


def run_measured(cmd: list[str], log: Path, stdin=None) -> dict:
    """Run ``cmd``; wall time, peak RSS (MiB, os.wait4) and the runner's stderr figures."""
    t0 = time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=stdin)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
    text = log.read_text()
    rec = {
        "rc": os.waitstatus_to_exitcode(status),
        "process_s": round(time.perf_counter() - t0, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "stdout_chars": len(out),
    }
    m = WALL.findall(text)
    if m:
        rec["wall_s"] = float(m[-1])
    rec["stages"] = {k: float(v) for k, v in STAGES.findall(text)}
    return rec


def run_repeated(cmd: list[str], log: Path, repeats: int) -> dict:
    """``run_measured`` ``repeats`` times in a row: the median wall time (C++: its stages' sum when it prints no
    wall), every run's wall in ``walls_s``, the highest peak RSS."""
    recs = [run_measured(cmd, log.with_name(f"{log.stem}.{i}{log.suffix}") if i else log) for i in range(repeats)]
    rec = dict(recs[0])
    walls = [w for w in (r.get("wall_s") or cpp_wall(r) for r in recs) if w]
    if walls:
        rec["wall_s"] = round(statistics.median(walls), 3)
        rec["walls_s"] = walls
    rec["peak_rss_mb"] = max(r["peak_rss_mb"] for r in recs)
    rec["rc"] = max(abs(r["rc"]) for r in recs)
    return rec


def cpp_wall(rec: dict) -> float | None:
    return rec.get("wall_s") or (sum(rec["stages"].values()) if rec["stages"] else None)


def write_audio(out: Path, seconds: float) -> Path:
    import numpy as np
    import soundfile as sf

    path = out / f"audio_{seconds:g}s.wav"
    if not path.exists():
        jfk, rate = sf.read(str(JFK), dtype="int16")
        reps = int(np.ceil(seconds * rate / len(jfk)))
        with sf.SoundFile(str(path), "w", rate, 1, subtype="PCM_16") as f:
            for _ in range(reps - 1):
                f.write(jfk)
            f.write(jfk[: int(seconds * rate) - (reps - 1) * len(jfk)])
    return path


def live_latency(pte: Path, wav: Path, seconds: float, left: float, chunk: float, right: float) -> dict:
    """Feed ``seconds`` of ``wav`` in real time (0.1 s blocks) to a StreamingTranscriber; token delays."""

    from parakeet_executorch.audio import load_audio
    from parakeet_executorch.runtime.buffered import ContextSize
    from parakeet_executorch.runtime.cli import load_transcriber
    from parakeet_executorch.runtime.streaming import StreamingTranscriber

    transcriber = load_transcriber(pte)
    meta = transcriber.model.metadata
    audio = load_audio(wav, meta.sample_rate)[: int(seconds * meta.sample_rate)]
    context = ContextSize.from_seconds(left, chunk, right, meta.window_stride, meta.subsampling_factor)
    stream = StreamingTranscriber(transcriber, context)
    block = meta.sample_rate // 10
    delays = []
    behind = 0.0
    start = time.perf_counter()
    for i in range(0, len(audio), block):
        arrival = (i + block) / meta.sample_rate  # the block is complete at this audio time
        now = time.perf_counter() - start
        if now < arrival:
            time.sleep(arrival - now)
        else:
            behind = max(behind, now - arrival)
        result = stream.feed(audio[i : i + block])
        returned = time.perf_counter() - start
        delays += [returned - min(s.end, arrival) for s in result.tokens]
    delays.sort()
    frame = meta.window_stride * meta.subsampling_factor
    return {
        "audio_s": seconds,
        "left_s": context.left * frame,
        "chunk_s": context.chunk * frame,
        "right_s": context.right * frame,
        "floor_s": (context.chunk + context.right) * frame,
        "tokens": len(delays),
        "median_s": round(statistics.median(delays), 3) if delays else None,
        "p95_s": round(delays[int(0.95 * (len(delays) - 1))], 3) if delays else None,
        "max_behind_real_time_s": round(behind, 3),
    }


def _length(seconds: float) -> str:
    return f"{seconds:g} s" if seconds < 60 else f"{seconds / 60:g} min"


def _evened_chunk_s(context, meta, seconds: float) -> float:
    """The chunk in seconds the runners use for a file of ``seconds`` with the default ``context`` filled for
    ``meta`` (the export's metadata as ``main`` describes it)."""
    from parakeet_executorch.runtime.buffered import ContextSize

    frames = ContextSize.from_seconds(
        context.left_context_seconds,
        context.chunk_seconds,
        context.right_context_seconds,
        meta.window_stride,
        meta.subsampling_factor,
    )
    frame_samples = meta.hop_length * meta.subsampling_factor
    return frames.evened(int(seconds * meta.sample_rate), frame_samples).chunk * frame_samples / meta.sample_rate


def markdown(res: dict) -> str:
    lines = [
        f"# Long-form transcription, {res['size']} model, {res['recipe']} ({res['host']})",
        "",
        f".pte {res['pte_mb']} MiB (--max-audio-seconds {res.get('max_audio_seconds', 60):g}); threads: "
        f"{res['threads']}; default contexts (left | chunk | right): "
        f"{res['context']}{res.get('evened', '')}; RTFx from the median of {res.get('repeats', 1)} run(s) each",
        "",
        f"| runner | audio | mode | RTFx | vs single pass {res.get('max_audio_seconds', 60):g} s | peak RSS MiB | "
        "RSS / .pte | RSS vs 1 min |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in res["runs"]:
        lines.append(
            f"| {r['runner']} | {_length(r['audio_s'])} | {r['mode']} | {r.get('rtfx', '-')} | "
            f"{r.get('vs_single', '-')} | {r['peak_rss_mb']} | {r.get('rss_vs_pte', '-')} | "
            f"{r.get('rss_vs_1min', '-')} |"
        )
    if res.get("live"):
        lv = res["live"]
        lines += [
            "",
            f"Live path ({lv['audio_s']:g} s fed in real time, 0.1 s blocks; left {lv['left_s']:.2f} s, "
            f"chunk {lv['chunk_s']:.2f} s, right {lv['right_s']:.2f} s): token delay median "
            f"{lv['median_s']} s, p95 {lv['p95_s']} s over {lv['tokens']} tokens; theoretical floor "
            f"{lv['floor_s']:.2f} s; at most {lv['max_behind_real_time_s']} s behind real time.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--size", choices=("tiny", "small", "full"), default="full")
    ap.add_argument("--recipe", choices=sorted(RECIPES), default="8da4w")
    ap.add_argument("--minutes", type=float, nargs="+", default=[1.0, 10.0, 60.0])
    ap.add_argument("--model", type=Path, help="a prepared (biased) .nemo to reuse")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--live-seconds", type=float, default=30.0, help="0 skips the live measurement")
    ap.add_argument(
        "--max-audio-seconds",
        type=float,
        default=60.0,
        help="the export's bound (the single pass reference is then that long, and the default chunk fills it)",
    )
    ap.add_argument("--no-cpp", action="store_true")
    ap.add_argument("--prepare-only", action="store_true", help="build the model and export, time nothing")
    ap.add_argument(
        "--repeats", type=int, default=1, help="run each transcription this many times; RTFx from the median wall"
    )
    args = ap.parse_args(argv)
    out: Path = args.out
    (out / "logs").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    py = [sys.executable, "-m", "parakeet_executorch.runtime.cli"]

    nemo = args.model or out / f"bench_{args.size}.nemo"
    if not nemo.exists():
        import numpy as np
        import soundfile as sf

        tune = out / "tune.npy"
        audio, _ = sf.read(str(JFK), dtype="float32")
        np.save(tune, audio)
        subprocess.run(
            [
                sys.executable,
                str(WORKER),
                "prepare",
                f"build:{args.size}:0",
                str(nemo),
                str(tune),
                "3.0",
                "auto",
                str(out / "model.json"),
            ],
            check=True,
            env=env,
        )
    bound = args.max_audio_seconds
    pte_dir = out / "pte" / (args.recipe if bound == 60 else f"{args.recipe}-{bound:g}s")
    if not (pte_dir / "model.pte").exists():
        from _bench_worker import export_step

        from parakeet_executorch.export.api import ExportOptions

        backend, q = RECIPES[args.recipe]
        subprocess.run(
            export_step(nemo, ExportOptions(backend=backend, quantize=q, max_audio_seconds=bound, output_dir=pte_dir)),
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
    pte = pte_dir / "model.pte"
    if args.prepare_only:
        return 0
    pte_mb = round(pte.stat().st_size / 2**20, 1)

    from types import SimpleNamespace

    from bench_transcribe import cpu_name

    from parakeet_executorch.runtime.longform import FILE_CONTEXT, LongFormOptions

    # The default contexts as the runners fill them for this export (Parakeet's 10 ms hop, 8x subsampling, 16 kHz).
    meta = SimpleNamespace(
        max_audio_samples=int(bound * 16000),
        sample_rate=16000,
        window_stride=0.01,
        subsampling_factor=8,
        hop_length=160,
    )
    context = LongFormOptions(*FILE_CONTEXT).for_model(meta)

    runs = []
    # The single pass over the longest audio the export takes is the speed reference.
    wav_single = write_audio(out, bound)
    single = run_repeated(
        py + ["--model", str(pte), str(wav_single), "--chunk-seconds", "0"],
        out / "logs" / f"py_single_{bound:g}s.log",
        args.repeats,
    )
    runs.append({"runner": "Python", "audio_s": bound, "mode": "single pass", **single})
    base = {"Python": single.get("wall_s")}
    have_cpp = CPP_RUNNER.exists() and not args.no_cpp
    if have_cpp:
        c = run_repeated(
            [str(CPP_RUNNER), "--model_path", str(pte), "--audio_path", str(wav_single), "--chunk_seconds", "0"],
            out / "logs" / f"cpp_single_{bound:g}s.log",
            args.repeats,
        )
        runs.append({"runner": "C++", "audio_s": bound, "mode": "single pass", **c})
        base["C++"] = cpp_wall(c)
    for minutes in args.minutes:
        wav = write_audio(out, minutes * 60)
        r = run_repeated(py + ["--model", str(pte), str(wav)], out / "logs" / f"py_{minutes:g}min.log", args.repeats)
        runs.append({"runner": "Python", "audio_s": minutes * 60, "mode": "buffered", **r})
        if have_cpp:
            c = run_repeated(
                [str(CPP_RUNNER), "--model_path", str(pte), "--audio_path", str(wav)],
                out / "logs" / f"cpp_{minutes:g}min.log",
                args.repeats,
            )
            runs.append({"runner": "C++", "audio_s": minutes * 60, "mode": "buffered", **c})
    one_min = {r["runner"]: r["peak_rss_mb"] for r in runs if r["mode"] == "buffered" and r["audio_s"] == 60}
    for r in runs:
        wall = r.get("wall_s") if r["runner"] == "Python" else cpp_wall(r)
        if wall:
            r["rtfx"] = round(r["audio_s"] / wall, 2)
            b = base.get(r["runner"])
            if b:
                r["vs_single"] = round((r["audio_s"] / wall) / (bound / b), 3)
        r["rss_vs_pte"] = round(r["peak_rss_mb"] / pte_mb, 2)
        if r["runner"] in one_min and r["mode"] == "buffered":
            r["rss_vs_1min"] = round(r["peak_rss_mb"] / one_min[r["runner"]], 3)
    live = None
    if args.live_seconds > 0:
        live = live_latency(pte, write_audio(out, 60), args.live_seconds, 10.0, 1.6, 1.6)
    long_minutes = [m for m in args.minutes if m * 60 > context.window_seconds]
    res = {
        "size": args.size,
        "recipe": args.recipe,
        "pte_mb": pte_mb,
        "threads": args.threads,
        "host": f"{cpu_name()}, {os.cpu_count()} cores",
        "max_audio_seconds": bound,
        "context": " | ".join(
            f"{s:g} s" for s in (context.left_context_seconds, context.chunk_seconds, context.right_context_seconds)
        ),
        # The runners even the default chunk out over each file (ContextSize.evened): say what it came to.
        "evened": "; the chunk evened out over each file ("
        + ", ".join(f"{m:g} min: {_evened_chunk_s(context, meta, m * 60):.2f} s" for m in long_minutes)
        + ")",
        "repeats": args.repeats,
        "runs": runs,
        "live": live,
    }
    (out / "results.json").write_text(json.dumps(res, indent=2))
    md = markdown(res)
    (out / "results.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
