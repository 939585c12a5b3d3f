"""The CI scripts run for real on the tiny test model: .ci/scripts/export_model_artifact.sh (xnnpack, incl. 8da4w;
wrong name/backend pairs refused before any model loads) and .ci/scripts/test_model_e2e.sh (C++ runner against the
Python runner on jfk.wav, and against expected text); plus lint.sh (workflows, shell scripts, Python, C++).

The metal and cuda workflows cannot run here (no Mac, no GPU); they are only linted, and the parts of their scripts
that run on any host are run: argument checks, the Metal build's resolved paths and pinned revision, and
backends/metal/compare_tokens.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

EXPORT = REPO / ".ci" / "scripts" / "export_model_artifact.sh"
E2E = REPO / ".ci" / "scripts" / "test_model_e2e.sh"
LINT = REPO / ".ci" / "scripts" / "lint.sh"
MACOS_E2E = REPO / "backends" / "metal" / "run_e2e_macos.sh"
METAL_BUILD = REPO / "backends" / "metal" / "build_runtime_macos.sh"
COMPARE_TOKENS = REPO / "backends" / "metal" / "compare_tokens.py"
WORKFLOWS = REPO / ".github" / "workflows"
EXPORT_TIMEOUT = 1200


def run(args: list, timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def check_artifacts(out: Path) -> None:
    for name in ("model.pte", "tokenizer.model", "export_report.json"):
        assert (out / name).is_file(), f"{out / name} missing"
        assert (out / name).stat().st_size > 0, f"{out / name} empty"


def export(out: Path, quant: str, backend: str) -> subprocess.CompletedProcess:
    proc = run([EXPORT, "test-tiny", quant, out, backend], EXPORT_TIMEOUT)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def xnnpack_artifact(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ci") / "xnnpack-non-quantized"
    export(out, "non-quantized", "xnnpack")
    return out


@pytest.mark.slow
def test_export_non_quantized_xnnpack(xnnpack_artifact):
    check_artifacts(xnnpack_artifact)
    assert (xnnpack_artifact / "test-tiny.nemo").is_file(), "test-tiny builds the tiny model into OUTPUT_DIR"
    assert '"backend": "xnnpack"' in (xnnpack_artifact / "export_report.json").read_text()


@pytest.mark.slow
def test_export_8da4w_xnnpack(tmp_path):
    out = tmp_path / "xnnpack-8da4w"
    export(out, "quantized-8da4w", "xnnpack")
    check_artifacts(out)
    report = (out / "export_report.json").read_text()
    assert '"recipe": "8da4w"' in report


@pytest.mark.parametrize(
    "quant, backend, says",
    [
        ("quantized-int4-metal", "xnnpack", "it is for: metal, mlx"),
        ("quantized-int4-tile-packed", "xnnpack", "it is for: cuda"),
        ("quantized-8da4w", "portable", "it is for: xnnpack"),
        ("quantized-int5", "xnnpack", "unknown quantization name 'quantized-int5'"),
        ("non-quantized", "tpu", "unknown backend 'tpu'"),
    ],
)
def test_export_refuses_wrong_pairs_before_loading(tmp_path, quant, backend, says):
    out = tmp_path / "out"
    t0 = time.monotonic()
    proc = run([EXPORT, "test-tiny", quant, out, backend], 60)
    assert time.monotonic() - t0 < 60
    assert proc.returncode != 0
    assert says in proc.stderr
    # The message names every allowed pair.
    for pair in (
        "non-quantized: portable, xnnpack, metal, mlx, cuda",
        "quantized-int4-metal: metal, mlx",
        "quantized-int4-tile-packed: cuda",
        "quantized-8da4w: xnnpack",
    ):
        assert pair in proc.stderr, proc.stderr
    assert not out.exists(), "nothing may be built or written for a refused pair"


def test_export_usage(tmp_path):
    proc = run([EXPORT, "test-tiny", "non-quantized"], 60)
    assert proc.returncode != 0
    assert "usage:" in proc.stderr and "MODEL_ID QUANT_NAME OUTPUT_DIR BACKEND" in proc.stderr


def test_export_missing_nemo_file(tmp_path):
    proc = run([EXPORT, tmp_path / "nope.nemo", "non-quantized", tmp_path / "out", "xnnpack"], 60)
    assert proc.returncode != 0
    assert "no such .nemo file" in proc.stderr


@pytest.mark.slow
def test_e2e_cpp_matches_python_runner(xnnpack_artifact, jfk_path):
    """Builds the runner (the script runs the build script) and compares it with parakeet-transcribe."""
    proc = run([E2E, xnnpack_artifact, jfk_path], 1800)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "C++ and Python runners agree" in proc.stdout


def _python_transcript(folder: Path, audio: Path) -> str:
    proc = subprocess.run(
        ["python", "-m", "parakeet_executorch.runtime.cli", "--model", str(folder / "model.pte"), str(audio)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.slow
def test_e2e_expected_text(xnnpack_artifact, jfk_path, tmp_path):
    """With EXPECTED_TEXT_FILE: equal text passes, other text fails; E2E_MATCH=contains takes a part of it."""
    text = _python_transcript(xnnpack_artifact, jfk_path)
    assert text, "the tiny model must emit text, or the comparison proves nothing"
    skip_build = {"SKIP_BUILD": "1"} if (REPO / "cmake-out/examples/parakeet/parakeet_runner").is_file() else {}

    same = tmp_path / "same.txt"
    same.write_text(text + "\n")
    proc = run([E2E, xnnpack_artifact, jfk_path, same], 1800, skip_build)
    assert proc.returncode == 0, proc.stderr[-3000:]

    other = tmp_path / "other.txt"
    other.write_text("ask not what your country can do for you\n")
    proc = run([E2E, xnnpack_artifact, jfk_path, other], 600, {"SKIP_BUILD": "1"})
    assert proc.returncode != 0
    assert "transcript differs" in proc.stderr
    proc = run([E2E, xnnpack_artifact, jfk_path, other], 600, {"SKIP_BUILD": "1", "E2E_MATCH": "contains"})
    assert proc.returncode != 0
    assert "does not contain" in proc.stderr

    part = tmp_path / "part.txt"
    part.write_text(text[len(text) // 4 : len(text) // 2].upper() + "\n")
    proc = run([E2E, xnnpack_artifact, jfk_path, part], 600, {"SKIP_BUILD": "1", "E2E_MATCH": "contains"})
    assert proc.returncode == 0, proc.stderr[-3000:]


# The same two scripts run on the demo model in every linux.yml run (its last export step); here with -m extended.
@pytest.mark.extended
@pytest.mark.slow
def test_demo_model_through_the_scripts_prints_the_sample_sentence(tmp_path):
    """The trained demo model, exported by the CI script (non-quantized, XNNPACK) and run by the C++ runner, says
    the sample's text exactly: test_model_e2e.sh's default exact match against sample.txt, and the printed
    transcript holds it. (The 8da4w and 8da8w exports give the same text; metal.yml's hosted job checks those.)
    """
    from parakeet_executorch.demo import DEMO_AUDIO, DEMO_TEXT

    out = tmp_path / "demo-fp32"
    proc = run([EXPORT, "demo", "non-quantized", out, "xnnpack"], EXPORT_TIMEOUT)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    check_artifacts(out)
    skip_build = {"SKIP_BUILD": "1"} if (REPO / "cmake-out/examples/parakeet/parakeet_runner").is_file() else {}
    proc = run([E2E, out, DEMO_AUDIO, DEMO_TEXT], 1800, skip_build)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert DEMO_TEXT.read_text().strip() in proc.stdout


def test_e2e_refuses_missing_model(tmp_path, jfk_path):
    proc = run([E2E, tmp_path, jfk_path], 60, {"SKIP_BUILD": "1"})
    assert proc.returncode != 0
    assert "model.pte is missing" in proc.stderr


def test_macos_script_refuses_other_hosts():
    proc = run([MACOS_E2E, "nvidia/parakeet-tdt-0.6b-v3", "non-quantized", "jfk.wav", "ask not"], 60)
    assert proc.returncode != 0
    assert "macOS on Apple silicon" in proc.stderr


def test_macos_script_takes_the_callers_match_mode():
    """E2E_MATCH comes from the caller (metal.yml passes exact for the demo); a bad value is refused before the
    host check, and exact is accepted (the run then stops at the host check, as with the default)."""
    args = [MACOS_E2E, "demo", "non-quantized", "sample.wav", "some text"]
    proc = run(args, 60, {"E2E_MATCH": "fuzzy"})
    assert proc.returncode == 1 and "E2E_MATCH must be exact or contains, got 'fuzzy'" in proc.stderr
    proc = run(args, 60, {"E2E_MATCH": "exact"})
    assert proc.returncode == 1 and "macOS on Apple silicon" in proc.stderr
    assert "E2E_MATCH=contains" not in MACOS_E2E.read_text(), "a hard-coded mode would override the caller's"


def test_metal_runtime_build_refuses_other_hosts_and_bad_arguments():
    proc = run([METAL_BUILD], 60)
    assert proc.returncode == 1 and "macOS on Apple silicon" in proc.stderr
    assert proc.stderr.count("\n") == 1 and not (REPO / "build" / "executorch-metal").exists()
    proc = run([METAL_BUILD, "--nope"], 60)
    assert proc.returncode == 2 and "usage" in proc.stderr
    proc = run([METAL_BUILD], 60, {"ET_SRC": "build/executorch-metal/src"})
    assert proc.returncode == 1 and "a folder named executorch" in proc.stderr


def _metal_build_config(env: dict) -> dict:
    proc = run([METAL_BUILD, "--print-config"], 60, env)
    assert proc.returncode == 0, proc.stderr
    return dict(line.split("=", 1) for line in proc.stdout.splitlines())


def test_metal_runtime_build_makes_its_paths_absolute():
    """Relative paths are taken from the repository root and made absolute before any step runs (CMake would not
    find a relative CMAKE_PREFIX_PATH, and pip runs inside ET_SRC); absolute overrides are kept as given."""
    defaults = _metal_build_config({"ET_SRC": "", "ET_PREFIX": "", "RUNNER_BUILD": "", "PYTHON": ""})
    assert defaults["ET_SRC"] == f"{REPO}/build/executorch-metal/executorch"
    assert defaults["ET_PREFIX"] == f"{REPO}/build/executorch-metal/install"
    assert defaults["RUNNER_BUILD"] == f"{REPO}/cmake-out/examples/parakeet-metal"
    assert defaults["PYTHON"] == "python", "a bare command name is looked up in PATH, not made a path"

    config = _metal_build_config(
        {
            "ET_PREFIX": "relative/prefix",
            "ET_SRC": "./relative/executorch",
            "RUNNER_BUILD": "/elsewhere/runner-build",
            "PYTHON": ".venv/bin/python",
        }
    )
    assert config["ET_PREFIX"] == f"{REPO}/relative/prefix"
    assert config["ET_SRC"] == f"{REPO}/relative/executorch"
    assert config["RUNNER_BUILD"] == "/elsewhere/runner-build"
    assert config["PYTHON"] == f"{REPO}/.venv/bin/python"
    assert not (REPO / "relative").exists(), "printing the configuration must not create folders"


def test_metal_runtime_build_pins_the_installed_executorch_revision():
    """The source build clones ExecuTorch at PINNED_REV when the wheel's revision is unknown: it must be the revision
    the installed (pinned) wheel was built from."""
    import executorch.version

    pinned = re.search(r"^PINNED_REV=([0-9a-f]{40})\b", METAL_BUILD.read_text(), re.MULTILINE)
    assert pinned, f"no PINNED_REV=<40 hex digits> line in {METAL_BUILD}"
    installed = executorch.version.git_version.split("+")[0]
    assert pinned.group(1) == installed, f"executorch {executorch.version.__version__} was built from {installed}"
    assert _metal_build_config({})["PINNED_REV"] == installed


def test_runner_with_metal_needs_an_executorch_built_with_it(tmp_path):
    """-DPARAKEET_METAL=ON against the wheel (which has no Metal delegate) stops at configure, naming the fix."""
    import executorch

    if shutil.which("cmake") is None:
        pytest.fail("cmake is not installed (pip install 'cmake>=3.28')")
    prefix = Path(list(executorch.__path__)[0]) / "lib" / "cmake"
    proc = subprocess.run(
        [
            "cmake",
            "-S",
            str(REPO / "examples" / "parakeet"),
            "-B",
            str(tmp_path),
            f"-DCMAKE_PREFIX_PATH={prefix}",
            "-DPARAKEET_METAL=ON",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "has no Metal delegate" in proc.stderr and "build_runtime_macos.sh" in proc.stderr


def test_workflows_name_the_ci_scripts():
    metal = (WORKFLOWS / "metal.yml").read_text()
    assert "macos-14" in metal and "backends/metal/run_e2e_macos.sh" in metal
    assert "quantized-int4-metal" in metal and "non-quantized" in metal
    assert "nvidia/parakeet-tdt-0.6b-v3" in metal and "ask not what your country can do for you" in metal
    # Hosted macOS runners have no Metal device: there only the CPU demo and the Metal-lowering tests run, and the
    # GPU legs wait for a manual run on a runner that has one.
    hosted, gpu = metal.split("\n  macos-hosted:\n")[1].split("\n  metal:\n")
    assert "macos-14" in hosted and "parakeet-demo" in hosted and "tests/test_metal_lowering.py" in hosted
    assert "run_e2e_macos.sh" not in hosted and "if: github.event_name == 'workflow_dispatch'" in gpu
    # On the GPU runner: the demo's exact text, and jfk's tokens against the XNNPACK fp32 export.
    assert "E2E_MATCH=exact bash backends/metal/run_e2e_macos.sh demo" in gpu
    assert 'non-quantized "$reference" xnnpack' in gpu and "backends/metal/compare_tokens.py" in gpu
    assert "--format json" in gpu
    cuda = (WORKFLOWS / "cuda.yml").read_text()
    assert "quantized-int4-tile-packed" in cuda and "cuda" in cuda
    linux = (WORKFLOWS / "linux.yml").read_text()
    assert "test-tiny" in linux and ".ci/scripts/test.sh" in linux and ".ci/scripts/install.sh" in linux
    for text in (metal, cuda, linux):
        assert "workflow_dispatch" in text and "pull_request" in text
        assert "actions/checkout@v4" in text and "actions/setup-python@v5" in text
        assert 'python-version: "3.11"' in text and "pip install torch==2.13.0" in text


def _transcript(path: Path, ids: list[int]) -> Path:
    """A transcript as parakeet-transcribe --format json writes it, with made-up texts and times."""
    tokens = [{"text": f"t{i}", "start": 0.1 * n, "end": 0.1 * n + 0.08, "id": i} for n, i in enumerate(ids)]
    path.write_text(json.dumps({"text": " ".join(t["text"] for t in tokens), "tokens": tokens, "words": []}))
    return path


def _compare_tokens(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(COMPARE_TOKENS), *map(str, args)], capture_output=True, text=True, timeout=60
    )


def test_compare_tokens_equal_sequences_pass_exactly(tmp_path):
    ids = [5, 17, 17, 230, 8, 1023, 44, 9, 311, 2]
    proc = _compare_tokens(_transcript(tmp_path / "ref.json", ids), _transcript(tmp_path / "same.json", ids), 1.0)
    assert proc.returncode == 0, proc.stderr
    assert "token agreement 1.000 (10 tokens matched; reference 10, candidate 10)" in proc.stdout


def test_compare_tokens_threshold(tmp_path):
    """One token in ten replaced: agreement 0.9, which passes 0.9 and fails an exact check."""
    ref = _transcript(tmp_path / "ref.json", [5, 17, 17, 230, 8, 1023, 44, 9, 311, 2])
    near = _transcript(tmp_path / "near.json", [5, 17, 17, 230, 8, 1000, 44, 9, 311, 2])
    assert _compare_tokens(ref, near, 0.9).returncode == 0
    proc = _compare_tokens(ref, near, 1)
    assert proc.returncode == 1 and "token agreement 0.900" in proc.stderr


def test_compare_tokens_very_different_sequences_fail_with_one_line(tmp_path):
    ref = _transcript(tmp_path / "ref.json", [5, 17, 17, 230, 8, 1023, 44, 9, 311, 2])
    other = _transcript(tmp_path / "other.json", [600, 601, 602, 603])
    proc = _compare_tokens(ref, other, 0.9)
    assert proc.returncode == 1
    assert proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("compare_tokens: error: token agreement 0.000") and "below 0.9" in proc.stderr


def test_compare_tokens_refuses_unusable_input(tmp_path):
    ref = _transcript(tmp_path / "ref.json", [1, 2, 3])
    no_ids = tmp_path / "text_only.json"
    no_ids.write_text(json.dumps({"text": "hello"}))
    proc = _compare_tokens(ref, no_ids, 0.9)
    assert proc.returncode == 2 and "'tokens' list" in proc.stderr
    proc = _compare_tokens(ref, ref, 1.5)
    assert proc.returncode == 2 and "between 0 and 1" in proc.stderr


def test_lint_passes():
    """lint.sh: actionlint over .github/workflows, shellcheck over .ci, ruff, mypy, import-linter and clang-format;
    and shellcheck over the macOS script."""
    proc = run([LINT], 600)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert "shellcheck: no findings" in proc.stdout
    assert "kept, 0 broken." in proc.stdout  # import-linter
    assert "clang-format:" in proc.stdout
    if shutil.which("shellcheck") is None:
        pytest.fail("shellcheck is not installed (apt-get install shellcheck)")
    proc = subprocess.run(["shellcheck", str(MACOS_E2E), str(METAL_BUILD)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout
