"""Issue 6: transcription RTFx, memory and size of ExecuTorch (.pte, Python and C++ runners), NeMo eager and
ONNX Runtime (NeMo's ONNX export, fp32 and int8) on the same random-weight Parakeet TDT model and the same audio.

    python benchmarks/bench_transcribe.py --size tiny --audio-seconds 10 60 --out /tmp/bench
    python benchmarks/bench_transcribe.py --size full --audio-seconds 10 60 --out /tmp/bench_full \
        --recipes xnnpack-fp32 xnnpack-8da4w

Steps: build the test model (``parakeet-make-test-model``), bias its blank logit so that it emits a realistic
token rate (``--target-tokens-per-second``; random joints otherwise emit a token on nearly every frame), export
every recipe and NeMo's ONNX graphs (each step in its own process: wall time and peak RSS via os.wait4), then
start one long-lived worker process per system (benchmarks/_bench_worker.py) and time them interleaved
(A B C A B C ...), one warm-up run plus ``--runs`` timed runs per audio length; the C++ runner is one process per
run. Agreement is checked on the warm-up transcripts before any timing is reported. Writes results.json,
results.md and rtfx.png in --out. See benchmarks/README.md for the columns.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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
from parakeet_executorch.export.recipe_registry import REGISTRY  # noqa: E402 (light: no torch)


def _label(backend: str, recipe: str) -> str:
    return f"{backend}-{'fp32' if recipe == 'none' else recipe}"


# system name -> (backend, recipe, decoder recipe or None for the recipe's own), every pair of the registry on the
# CPU backends, plus an 8da8w encoder with another decoder and joint, spelled encoder+decoder: with fp32, what
# `parakeet-export --quantize auto` gives on a CPU with VNNI (export/cpu_recipe.py), and with 8da4w
RECIPES = {_label(b, r.name): (b, r.name, None) for b in ("xnnpack", "portable") for r in REGISTRY if r.runs_on(b)}
RECIPES["xnnpack-8da8w+8da4w"] = ("xnnpack", "8da8w", "8da4w")
RECIPES["xnnpack-8da8w+fp32"] = ("xnnpack", "8da8w", "none")
RECIPES["xnnpack-8da8w+fpa8w"] = ("xnnpack", "8da8w", "fpa8w")
DEFAULT_RECIPES = ("xnnpack-fp32", "xnnpack-8da4w", "xnnpack-8da8w", "xnnpack-fpa4w", "portable-fp32")
FP32_RECIPES = tuple(name for name, (_, recipe, _dec) in RECIPES.items() if recipe == "none")


# ---------------------------------------------------------------------------------------------------------------
# child processes


def _env() -> dict:
    env = dict(os.environ)
    src = str(REPO / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_steps(steps: list[tuple[str, list[str], Path]], jobs: int) -> dict[str, dict]:
    """Run one-shot commands, at most ``jobs`` at a time; per step: rc, wall_s and its own peak RSS (os.wait4)."""
    pending = list(steps)
    running: dict[int, tuple[str, float, object]] = {}
    out: dict[str, dict] = {}
    while pending or running:
        while pending and len(running) < jobs:
            name, cmd, log = pending.pop(0)
            f = open(log, "w")  # noqa: SIM115 (closed when the process is reaped, below)
            p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=_env())
            running[p.pid] = (name, time.perf_counter(), f)
            print(f"  [{name}] started", flush=True)
        pid, status, usage = os.wait4(-1, 0)
        if pid not in running:
            continue
        name, t0, f = running.pop(pid)
        f.close()
        rc = os.waitstatus_to_exitcode(status)
        out[name] = {
            "rc": rc,
            "wall_s": round(time.perf_counter() - t0, 1),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        }
        print(f"  [{name}] rc {rc}, {out[name]['wall_s']} s, peak RSS {out[name]['peak_rss_mb']} MB", flush=True)
    return out


class Worker:
    """A long-lived system process (``_bench_worker.py serve``) answering one JSON line per request."""

    def __init__(self, name: str, args: list[str], log: Path):
        self.name = name
        self.log = open(log, "w")  # noqa: SIM115 (the worker's stderr while it lives; closed in close())
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env=_env(),
        )
        self.ready = None

    def recv(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} exited (rc {self.proc.wait()}); see {self.log.name}")
        return json.loads(line)

    def request(self, obj: dict) -> dict:
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()
        return self.recv()

    def close(self) -> dict:
        try:
            reply = self.request({"cmd": "exit"})
        except Exception as exc:  # crashed: report what is known
            reply = {"error": str(exc)}
        _, _, usage = os.wait4(self.proc.pid, 0)
        self.log.close()
        reply["ru_maxrss_kb"] = usage.ru_maxrss
        return reply


class CppSystem:
    """The C++ runner: one process per timed transcription (load, which includes its warm-up call on 0.5 s, then
    ``--repeat 2``: the first run at the file's own length, as each Python worker has run once at it, and the
    second, timed); one pass; timings parsed from its stderr."""

    def __init__(self, name: str, pte_dir: Path, log: Path, threads: int):
        self.name = name
        self.pte_dir = pte_dir
        self.log = log
        self.threads = threads
        self.loads: list[float] = []
        self.peak_kb = 0

    def run(self, wav: Path, audio_seconds: float) -> dict:
        cmd = [
            str(CPP_RUNNER),
            "--model_path",
            str(self.pte_dir / "model.pte"),
            "--tokenizer_path",
            str(self.pte_dir / "tokenizer.model"),
            "--audio_path",
            str(wav),
            # One pass, the work the Python runner's decode_tokens does: by default the runner decodes audio longer
            # than one window buffered, in overlapping windows, more encoder work than one pass.
            "--chunk_seconds",
            "0",
            # XNNPACK sizes its workspace and reshapes each delegate on the first call at a new length; the Python
            # workers have paid that at this length in their warm-up, so the C++ runner pays it in an untimed run.
            "--repeat",
            "2",
            "--threads",
            str(self.threads),
        ]
        import tempfile

        with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
            p = subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True)
            _, status, usage = os.wait4(p.pid, 0)  # this process's own peak RSS
            p.returncode = os.waitstatus_to_exitcode(status)
            fo.seek(0), fe.seek(0)
            out, err = fo.read(), fe.read()
        self.peak_kb = max(self.peak_kb, usage.ru_maxrss)
        with open(self.log, "a") as f:
            f.write(err)
        if p.returncode != 0:
            return {"error": err.strip()[-500:]}
        load = re.search(r"load: ([0-9.]+) s", err)
        rtfx = re.search(r"RTFx ([0-9.]+)", err)
        if load:
            self.loads.append(float(load.group(1)))
        # The runner prints RTFx with one decimal; recompute wall from its stage timings when present.
        timed = re.search(r"\(run 2/2\): (.*)", err)
        timed_line = timed.group(1) if timed else err
        stages = {k: float(v) for k, v in re.findall(r"(preprocess|encode|decode): ([0-9.]+) s", timed_line)}
        rtfx = re.search(r"RTFx ([0-9.]+)", timed_line) or rtfx
        wall = sum(stages.values()) if stages else (audio_seconds / float(rtfx.group(1)) if rtfx else float("nan"))
        return {"text": out.strip(), "wall_s": wall, **({"stages": stages} if stages else {})}


# ---------------------------------------------------------------------------------------------------------------
# helpers


def edit_distance(a: list, b: list) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def agreement(ref: list, hyp: list) -> float:
    """1 - edit distance / reference length (token accuracy against the fp32 transcript), floored at 0."""
    if not ref:
        return 1.0 if not hyp else 0.0
    return max(0.0, 1.0 - edit_distance(ref, hyp) / len(ref))


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# The x86 features that decide which recipe is fastest: XNNPACK's int8 GEMMs use VNNI where the CPU has it.
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8")


def cpu_isa() -> list[str]:
    """The ISA_FLAGS this CPU reports in /proc/cpuinfo (empty where there is none, e.g. macOS or Arm)."""
    from parakeet_executorch.export.cpu_recipe import host_cpu_features

    have = host_cpu_features().flags
    return [f for f in ISA_FLAGS if f in have]


def dir_mb(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / 2**20
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def write_audio(out: Path, seconds_list: list[float], speech_path: Path = JFK) -> dict[float, tuple[Path, Path]]:
    """``speech_path`` (any rate, mixed to mono at 16 kHz) looped or cut to each length in ``seconds_list``;
    returns ``{seconds: (npy, wav)}``, float32 samples in [-1, 1]."""
    import numpy as np
    import soundfile as sf

    sys.path.insert(0, str(REPO / "src"))
    from parakeet_executorch.audio import load_audio

    speech = load_audio(speech_path, 16000)
    files = {}
    for s in seconds_list:
        a = np.resize(speech, int(round(s * 16000))).astype(np.float32)  # real speech, looped to the length
        npy, wav = out / f"audio_{s:g}s.npy", out / f"audio_{s:g}s.wav"
        np.save(npy, a)
        sf.write(wav, a, 16000, subtype="FLOAT")
        files[s] = (npy, wav)
    return files


# ---------------------------------------------------------------------------------------------------------------
# report


def fmt(x, nd=1):
    return "—" if x is None else f"{x:.{nd}f}"


def export_bound_s(lengths: list[float]) -> float:
    """The .pte files' --max-audio-seconds for a run over ``lengths`` (seconds)."""
    return max(60.0, max(lengths) + 1)


def reuse_exports(src: Path, out: Path, args) -> tuple[dict, dict, Path]:
    """The steps record, model report and biased .nemo of the earlier run in ``src``, its ``pte/`` and ``onnx/``
    folders linked into ``out``.

    Raises:
        ValueError: ``src`` holds no finished run, or one of another size, another export bound or without one of
            ``args.recipes``.
    """
    report = src / "results.json"
    if not report.is_file():
        raise ValueError(f"{src} holds no finished run (no results.json); run bench_transcribe --out {src} first")
    prev = json.loads(report.read_text())
    if prev["size"] != args.size or prev.get("model_path") != (str(args.model) if args.model else None):
        raise ValueError(f"{src} was run on another model ({prev.get('model_path') or prev['size']})")
    if export_bound_s(prev["audio_seconds"]) != export_bound_s(sorted(args.audio_seconds)):
        raise ValueError(f"{src}'s .pte files were exported for other lengths ({prev['audio_seconds']} s)")
    missing = [r for r in args.recipes if not (src / "pte" / r / "model.pte").is_file()]
    if missing:
        raise ValueError(f"{src} has no export of {', '.join(missing)}; run it with these --recipes first")
    for name in ("pte", "onnx"):
        link = out / name
        if (src / name).is_dir() and not link.exists():
            link.symlink_to((src / name).resolve())
    return prev["steps"], json.loads((src / "model.json").read_text()), src / f"bench_{args.size}.nemo"


def markdown(res: dict) -> str:
    lengths = res["audio_seconds"]
    last = f"{lengths[-1]:g}"
    systems = res["systems"]
    ref_nemo = systems.get("nemo-eager", {}).get("rtfx", {}).get(last)
    ref_int8 = systems.get("ort-int8", {}).get("rtfx", {}).get(last)
    head = (
        ["system", "recipe", "size MB"]
        + [f"RTFx {s:g} s (tok/s)" for s in lengths]
        + ["peak RSS MB", "load s", f"× NeMo @{last} s", f"× ORT int8 @{last} s", "agreement vs fp32"]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in systems.values():
        cells = [s["system"], s["recipe"], fmt(s.get("size_mb"))]
        for L in lengths:
            k = f"{L:g}"
            r, tps = s.get("rtfx", {}).get(k), s.get("tokens_per_s", {}).get(k)
            cells.append("—" if r is None else f"{r:.2f} ({fmt(tps)})")
        r = s.get("rtfx", {}).get(last)
        cells += [
            fmt(s.get("peak_rss_mb"), 0),
            fmt(s.get("load_s"), 2),
            fmt(r / ref_nemo if r and ref_nemo else None, 2),
            fmt(r / ref_int8 if r and ref_int8 else None, 2),
        ]
        agr = s.get("agreement", {})
        cells.append(" / ".join(f"{agr[k]:.3f}" for k in agr) if agr else "ref")
        lines.append("| " + " | ".join(cells) + " |")
    m = res["model"]
    notes = [
        (
            f"Model: `{Path(res['model_path']).name}`"
            if res.get("model_path")
            else f"Model: `{res['size']}` random-weight Parakeet TDT"
        )
        + f" ({m.get('parameters', 0) / 1e6:.1f} M parameters, seed "
        f"{res['seed']}), blank logit biased by {m.get('blank_bias', 0):.3g} to {m.get('tokens_per_s_after', 0):.2f} "
        f"tokens/s on the tuning audio. Audio: {res.get('speech', 'jfk.wav')} looped or cut to each length. "
        f"Threads: {res['threads']} for every "
        f"system. {res['runs']} timed runs (median) after 1 warm-up, interleaved across systems.",
        f"fp32 systems token-equal to {res.get('fp32_reference') or 'nemo-eager'}: **{res['fp32_agree']}**"
        + ("" if res["fp32_agree"] else f" (differ: {', '.join(res['fp32_disagree'])})"),
        f"Host: {res['host']['cpu']} ({res['host']['cores']} cores; "
        f"{' '.join(res['host'].get('isa', [])) or 'ISA not read'}), {res['host']['mem_gb']} GB.",
    ]
    prof = [
        "",
        "Where the time goes (median seconds per stage. ExecuTorch: preprocessor method, encoder method, greedy "
        "TDT loop of decoder_step + joint calls; ONNX Runtime: numpy front end, encoder session, greedy loop over "
        "decoder_joint; NeMo: its preprocessor and encoder modules, timed by forward hooks, and the rest of "
        "transcribe(), its greedy decoding with its per-call data loading, as the decoder loop):",
        "",
        "| system | recipe | audio s | preprocess s | encoder s | decoder loop s | encoder share | "
        "fpa_lowbit kernel s: encoder (share) / loop (share) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in systems.values():
        for k, st in s.get("stages_s", {}).items():
            total = sum(st.get(x, 0) for x in ("preprocess", "encode", "decode")) or float("nan")
            prof.append(
                f"| {s['system']} | {s['recipe']} | {k} | {st.get('preprocess', 0):.3f} | "
                f"{st.get('encode', 0):.3f} | {st.get('decode', 0):.3f} | {st.get('encode', 0) / total:.0%} | "
                f"{kernel_shares(st)} |"
            )
    exp = encoder_alone(res) + cpp_vs_python(res) + ["", "| step | wall s | peak RSS MB | rc |", "|---|---|---|---|"]
    for k, v in res["steps"].items():
        exp.append(f"| {k} | {v['wall_s']} | {v['peak_rss_mb']} | {v['rc']} |")
    return "\n".join(lines + [""] + ["- " + n for n in notes] + (prof if len(prof) > 5 else []) + exp) + "\n"


def kernel_shares(st: dict) -> str:
    """fpa_lowbit's ExecuTorch kernel seconds in the encoder and in the greedy loop, each with its share of that stage
    ("-" for programs without its kernels)."""
    parts = []
    for key, stage in (("lowbit_kernel", "encode"), ("lowbit_kernel_loop", "decode")):
        kern = st.get(key)
        if kern is None:
            return "-"
        parts.append(f"{kern:.3f} ({kern / st[stage]:.0%})" if st.get(stage) else f"{kern:.3f}")
    return " / ".join(parts)


def encoder_alone(res: dict) -> list[str]:
    """Markdown rows: each ExecuTorch system's encoder seconds against NeMo's and ONNX Runtime int8's on the same
    audio (median of the timed runs; > 1: ExecuTorch's encoder is faster). The encoder does the same work in every
    system whatever tokens follow, so this comparison does not depend on the token rates."""
    systems = res["systems"]

    def enc(name: str, k: str) -> float | None:
        return systems.get(name, {}).get("stages_s", {}).get(k, {}).get("encode")

    rows = []
    for name, s in systems.items():
        if not name.startswith("et-"):
            continue
        for L in res["audio_seconds"]:
            k = f"{L:g}"
            e, e_nemo, e_int8 = enc(name, k), enc("nemo-eager", k), enc("ort-int8", k)
            if e is None:
                continue
            rows.append(
                f"| {s['system']} | {s['recipe']} | {k} | {e:.3f} | {fmt(e_nemo, 3)} | {fmt(e_int8, 3)} | "
                f"{fmt(e_nemo / e if e_nemo else None, 2)} | {fmt(e_int8 / e if e_int8 else None, 2)} |"
            )
    if not rows:
        return []
    return [
        "",
        "Encoder alone (median seconds; × > 1: the ExecuTorch encoder is faster):",
        "",
        "| system | recipe | audio s | encoder s | NeMo encoder s | ORT int8 encoder s | × NeMo | × ORT int8 |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]


def cpp_vs_python(res: dict) -> list[str]:
    """Markdown rows: the C++ runner's RTFx and encoder speed as a ratio to the Python runner's, per recipe and
    length (the same .pte, audio and threads; > 1: the C++ runner is faster)."""
    systems = res["systems"]
    rows = []
    for name, py in systems.items():
        cpp = systems.get(name.replace("et-py:", "et-cpp:")) if name.startswith("et-py:") else None
        if not cpp:
            continue
        for L in res["audio_seconds"]:
            k = f"{L:g}"
            r_py, r_cpp = py.get("rtfx", {}).get(k), cpp.get("rtfx", {}).get(k)
            e_py = py.get("stages_s", {}).get(k, {}).get("encode")
            e_cpp = cpp.get("stages_s", {}).get(k, {}).get("encode")
            rows.append(
                f"| {py['recipe']} | {k} | {fmt(r_py, 2)} | {fmt(r_cpp, 2)} | "
                f"{fmt(r_cpp / r_py if r_py and r_cpp else None, 2)} | "
                f"{fmt(e_py / e_cpp if e_py and e_cpp else None, 2)} |"
            )
    if not rows:
        return []
    return [
        "",
        "C++ runner against the Python runner (same .pte, audio and threads; > 1: C++ faster):",
        "",
        "| recipe | audio s | RTFx Python | RTFx C++ | RTFx C++ / Python | encoder s Python / C++ |",
        "|---|---|---|---|---|---|",
        *rows,
    ]


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, s in res["systems"].items() if s.get("rtfx")]
    lengths = res["audio_seconds"]
    width = 0.8 / max(len(lengths), 1)
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(names) + 2), 4.5))
    for i, L in enumerate(lengths):
        vals = [res["systems"][n]["rtfx"].get(f"{L:g}") or 0 for n in names]
        ax.bar([x + i * width for x in range(len(names))], vals, width, label=f"{L:g} s audio")
    ax.set_xticks([x + width * (len(lengths) - 1) / 2 for x in range(len(names))])
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("RTFx (audio s / wall s)")
    ax.set_title(f"Parakeet TDT ({res['size']}, random weights), {res['threads']} threads")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=("tiny", "small", "full"), default="tiny")
    ap.add_argument("--audio-seconds", type=float, nargs="+", default=[10.0, 60.0])
    ap.add_argument("--recipes", nargs="+", choices=sorted(RECIPES), default=list(DEFAULT_RECIPES))
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", type=int, default=5, help="timed runs per system and length (after one warm-up)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for every system")
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="export steps run at once (1 for honest export wall time; full size needs 1 on 24 GB)",
    )
    ap.add_argument(
        "--blank-bias",
        default="auto",
        help="'auto' (tune to --target-tokens-per-second), a number added to blank's logit, or 'none'",
    )
    ap.add_argument(
        "--target-tokens-per-second",
        type=float,
        default=3.0,
        help="token rate for --blank-bias auto (real English speech: ~3 tokens/s)",
    )
    ap.add_argument("--model", type=Path, help="use this .nemo instead of building one (still biased)")
    ap.add_argument("--speech", type=Path, default=JFK, help="audio looped or cut to each length (default: jfk.wav)")
    ap.add_argument(
        "--exports-from",
        type=Path,
        metavar="DIR",
        help="reuse the biased model, .pte files and ONNX models of an earlier run's --out DIR (same --size, "
        "--recipes and lengths); only the systems are timed again, e.g. at another --threads",
    )
    ap.add_argument("--no-cpp", action="store_true", help="skip the C++ runner")
    ap.add_argument("--no-ort", action="store_true", help="skip ONNX Runtime")
    ap.add_argument("--no-nemo", action="store_true", help="skip NeMo eager")
    args = ap.parse_args(argv)

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    logs = out / "logs"
    logs.mkdir(exist_ok=True)
    lengths = sorted(args.audio_seconds)
    t_start = time.perf_counter()
    print(
        f"threads: {args.threads} (torch, ExecuTorch's thread pool in both runners, onnxruntime intra-op)",
        flush=True,
    )
    audio = write_audio(out, lengths, args.speech)

    if args.exports_from:
        src = args.exports_from
        try:
            steps, model_info, nemo = reuse_exports(src, out, args)
        except ValueError as exc:
            print(f"bench_transcribe: error: {exc}", file=sys.stderr)
            return 2
        tune_audio = audio[min(lengths, key=lambda s: abs(s - 10.0))][0]
    else:
        # 1. model, biased to a realistic token rate
        steps: dict[str, dict] = {}
        # Without --model, the prepare step builds the model exactly as parakeet-make-test-model --size --seed does
        # (its build_model), in the same process as the bias tuning (one NeMo import instead of two).
        base = str(args.model) if args.model else f"build:{args.size}:{args.seed}"
        nemo = out / f"bench_{args.size}.nemo"
        tune_audio = audio[min(lengths, key=lambda s: abs(s - 10.0))][0]
        steps.update(
            run_steps(
                [
                    (
                        "build + bias blank",
                        [
                            sys.executable,
                            str(WORKER),
                            "prepare",
                            base,
                            str(nemo),
                            str(tune_audio),
                            str(args.target_tokens_per_second),
                            str(args.blank_bias),
                            str(out / "model.json"),
                        ],
                        logs / "prepare.log",
                    )
                ],
                1,
            )
        )
        if steps["build + bias blank"]["rc"] != 0:
            print(f"model preparation failed; see {logs}", file=sys.stderr)
            return 1
        model_info = json.loads((out / "model.json").read_text())

        # 2. exports, each in its own process
        from _bench_worker import export_step

        from parakeet_executorch.export.api import ExportOptions

        max_s = export_bound_s(lengths)
        export_steps = []
        for r in args.recipes:
            backend, q, q_decoder = RECIPES[r]
            options = ExportOptions(
                backend=backend,
                quantize=q,
                quantize_decoder=q_decoder,
                max_audio_seconds=max_s,
                output_dir=out / "pte" / r,
            )
            cmd = export_step(nemo, options)
            export_steps.append((f"export {r}", cmd, logs / f"export_{r}.log"))
        if not args.no_ort:
            export_steps.append(
                (
                    "onnx export",
                    [
                        sys.executable,
                        str(WORKER),
                        "onnx-export",
                        str(nemo),
                        str(out / "onnx" / "fp32"),
                        str(tune_audio),
                    ],
                    logs / "onnx_export.log",
                )
            )
        steps.update(run_steps(export_steps, args.jobs))
        if not args.no_ort and steps["onnx export"]["rc"] == 0:
            steps.update(
                run_steps(
                    [
                        (
                            "onnx int8 quantize",
                            [
                                sys.executable,
                                str(WORKER),
                                "onnx-quantize",
                                str(out / "onnx" / "fp32"),
                                str(out / "onnx" / "int8"),
                            ],
                            logs / "onnx_quantize.log",
                        )
                    ],
                    1,
                )
            )

    # 3. systems
    systems: dict[str, dict] = {}
    workers: dict[str, Worker] = {}
    cpp: dict[str, CppSystem] = {}
    if not args.no_nemo:
        systems["nemo-eager"] = {
            "system": "NeMo eager (PyTorch)",
            "recipe": "fp32",
            "fp32": True,
            "size_mb": dir_mb(nemo),
        }
        workers["nemo-eager"] = Worker("nemo-eager", ["nemo", str(nemo), str(args.threads)], logs / "nemo.log")
    if not args.no_ort:
        for v in ("fp32", "int8"):
            d = out / "onnx" / v
            step = steps.get("onnx export" if v == "fp32" else "onnx int8 quantize", {"rc": 1})
            if step["rc"] != 0:
                continue
            systems[f"ort-{v}"] = {
                "system": "ONNX Runtime",
                "recipe": v,
                "fp32": v == "fp32",
                "size_mb": dir_mb(d) - dir_mb(d / "frontend.npz"),
                "export_s": step["wall_s"],
                "export_peak_rss_mb": step["peak_rss_mb"],
            }
            if v == "int8":
                systems[f"ort-{v}"]["export_s"] = round(step["wall_s"] + steps["onnx export"]["wall_s"], 1)
            workers[f"ort-{v}"] = Worker(f"ort-{v}", ["ort", str(d), v, str(args.threads)], logs / f"ort_{v}.log")
    for r in args.recipes:
        step = steps[f"export {r}"]
        if step["rc"] != 0:
            systems[f"et-py:{r}"] = {"system": "ExecuTorch", "recipe": r, "error": f"export failed (rc {step['rc']})"}
            continue
        d = out / "pte" / r
        common = {
            "recipe": r,
            "fp32": r in FP32_RECIPES,
            "size_mb": dir_mb(d / "model.pte"),
            "export_s": step["wall_s"],
            "export_peak_rss_mb": step["peak_rss_mb"],
        }
        systems[f"et-py:{r}"] = {"system": "ExecuTorch (Python runner)", **common}
        workers[f"et-py:{r}"] = Worker(
            f"et-py:{r}",
            ["pte", str(d / "model.pte"), str(d / "tokenizer.model"), str(args.threads)],
            logs / f"pte_{r}.log",
        )
        if not args.no_cpp and CPP_RUNNER.exists():
            systems[f"et-cpp:{r}"] = {"system": "ExecuTorch (C++ runner)", **common}
            cpp[f"et-cpp:{r}"] = CppSystem(f"et-cpp:{r}", d, logs / f"cpp_{r}.log", args.threads)
    if not args.no_cpp and not CPP_RUNNER.exists():
        print(f"C++ runner not built ({CPP_RUNNER}); build with bash .ci/scripts/build_parakeet_runner.sh", flush=True)
    for name, w in list(workers.items()):
        ready = w.recv()
        if not ready.get("ready"):
            systems[name]["error"] = ready.get("error", "did not start")
            w.close()
            del workers[name]
            continue
        systems[name]["load_s"] = ready["load_s"]

    # 4. interleaved runs: warm-up (checked for agreement) then timed runs
    import sentencepiece as spm

    sp = (
        spm.SentencePieceProcessor(model_file=str(next((out / "pte").glob("*/tokenizer.model"))))
        if (out / "pte").exists() and list((out / "pte").glob("*/tokenizer.model"))
        else None
    )
    walls: dict[str, dict[str, list[float]]] = {n: {f"{L:g}": [] for L in lengths} for n in systems}
    stage_runs: dict[str, dict[str, list[dict]]] = {n: {f"{L:g}": [] for L in lengths} for n in systems}
    first: dict[str, dict[str, object]] = {n: {} for n in systems}
    order = list(workers) + list(cpp)
    for L in lengths:
        k = f"{L:g}"
        npy, wav = audio[L]
        for i in range(1 + args.runs):
            for name in order:
                if "error" in systems[name] and i == 0:
                    continue
                if name in workers:
                    rep = workers[name].request({"cmd": "run", "audio": str(npy)})
                else:
                    rep = cpp[name].run(wav, L)
                if "error" in rep:
                    systems[name]["error"] = rep["error"]
                    continue
                if i == 0:
                    first[name][k] = rep.get("tokens", rep.get("text"))
                else:
                    walls[name][k].append(rep["wall_s"])
                    if "stages" in rep:
                        stage_runs[name][k].append(rep["stages"])
            print(f"  {k} s audio: {'warm-up' if i == 0 else f'run {i}/{args.runs}'} done", flush=True)

    for name, w in workers.items():
        rep = w.close()
        systems[name]["peak_rss_mb"] = round(max(rep.get("vmhwm_kb", 0), rep.get("ru_maxrss_kb", 0)) / 1024, 1)
    for name, c in cpp.items():
        systems[name]["load_s"] = statistics.median(c.loads) if c.loads else None
        systems[name]["peak_rss_mb"] = c.peak_kb / 1024 if c.peak_kb else None

    # 5. agreement and RTFx
    ref_name = next((n for n in ("nemo-eager", "ort-fp32", "et-py:xnnpack-fp32") if first.get(n)), None)
    ref = first.get(ref_name) or {}
    disagree = []
    for name, s in systems.items():
        s["rtfx"], s["tokens_per_s"], s["wall_s"] = {}, {}, walls.get(name, {})
        for L in lengths:
            k = f"{L:g}"
            w = walls.get(name, {}).get(k)
            if w:
                s["rtfx"][k] = round(L / statistics.median(w), 3)
            runs = stage_runs.get(name, {}).get(k)
            if runs:  # per-method profile: median seconds of each stage
                s.setdefault("stages_s", {})[k] = {
                    st: round(statistics.median(r[st] for r in runs), 4) for st in runs[0]
                }
            got = first[name].get(k)
            if got is None or k not in ref:
                continue
            if isinstance(got, str):  # C++ runner: text; compare with the reference decoded to text
                ref_text = sp.decode(ref[k]) if sp else None
                hyp_n = len(sp.encode(got)) if sp else 0
                s["tokens_per_s"][k] = round(hyp_n / L, 2)
                same = ref_text is not None and " ".join(got.split()) == " ".join(ref_text.split())
                if not s.get("fp32"):
                    s.setdefault("agreement", {})[k] = (
                        round(agreement(sp.encode(ref_text), sp.encode(got)), 4) if sp else None
                    )
            else:
                s["tokens_per_s"][k] = round(len(got) / L, 2)
                same = got == ref[k]
                if not s.get("fp32"):
                    s.setdefault("agreement", {})[k] = round(agreement(ref[k], got), 4)
            s.setdefault("token_equal_fp32", {})[k] = same
            if s.get("fp32") and not same:
                disagree.append(f"{name}@{k}s")

    res = {
        "size": args.size,
        "seed": args.seed,
        "model_path": str(args.model) if args.model else None,
        "speech": args.speech.name,
        "audio_seconds": lengths,
        "runs": args.runs,
        "threads": args.threads,
        "recipes": args.recipes,
        "model": model_info,
        "steps": steps,
        "systems": systems,
        "fp32_reference": ref_name,
        "fp32_agree": not disagree,
        "fp32_disagree": disagree,
        "host": {
            "cpu": cpu_name(),
            "isa": cpu_isa(),
            "cores": os.cpu_count(),
            "mem_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        },
        "total_s": round(time.perf_counter() - t_start, 1),
    }
    (out / "results.json").write_text(json.dumps(res, indent=2))
    md = markdown(res)
    (out / "results.md").write_text(md)
    plot(res, out / "rtfx.png")
    print(md)
    print(f"wrote {out / 'results.json'}, {out / 'results.md'}, {out / 'rtfx.png'} in {res['total_s']} s")
    return 0 if not disagree else 2


if __name__ == "__main__":
    sys.exit(main())
