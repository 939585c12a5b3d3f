"""The Python runner's native runtime (``runtime/native_pte_model.py`` over ``examples/parakeet/capi``): the same
outputs as ExecuTorch's Python bindings for every method and recipe it runs, no torch in the process, and the same
one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from test_cpp_runner import RUNNER
from test_cpp_runner import runner as cpp_runner  # noqa: F401  (the fixture that builds RUNNER)

from conftest import REPO, export_tiny

BUILD_SCRIPT = REPO / ".ci" / "scripts" / "build_parakeet_runner.sh"


@pytest.fixture(scope="session")
def native_lib() -> Path:
    """The native runtime library, built (with the C++ runner) and installed into the package as users get it."""
    from parakeet_executorch.runtime import native_pte_model

    if native_pte_model.library_path() is None:
        proc = subprocess.run(["bash", str(BUILD_SCRIPT)], cwd=REPO, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
    path = native_pte_model.library_path()
    assert path is not None and path.is_file(), "the build script did not install the native runtime library"
    return path


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "parakeet_executorch.runtime.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    "recipe", [(), ("--quantize", "fpa4w"), ("--quantize", "8da4w")], ids=["fp32", "fpa4w", "8da4w"]
)
def test_every_method_equals_the_python_bindings(native_lib, tiny_nemo, export_root, jfk_audio, recipe):
    from parakeet_executorch.runtime.native_pte_model import NativePteModel
    from parakeet_executorch.runtime.pte_model import PteModel

    folder = export_tiny(tiny_nemo, export_root, "xnnpack", *recipe)
    native, pybind = NativePteModel(folder / "model.pte"), PteModel(folder / "model.pte")
    assert native.metadata == pybind.metadata
    meta = native.metadata
    n = 3 * meta.sample_rate
    wave = np.zeros(-(-n // meta.hop_length) * meta.hop_length, np.float32)
    wave[:n] = jfk_audio[:n]
    f_native, fl_native = native.preprocessor(wave, n)
    f_pybind, fl_pybind = pybind.preprocessor(wave, n)
    assert isinstance(f_native, np.ndarray) and fl_native == fl_pybind
    np.testing.assert_array_equal(f_native, f_pybind.numpy())
    e_native, el_native = native.encoder(f_native, fl_native)
    e_pybind, el_pybind = pybind.encoder(f_pybind, fl_pybind)
    assert el_native == el_pybind and e_native.shape == tuple(e_pybind.shape)
    np.testing.assert_array_equal(e_native, e_pybind.numpy())
    state_native, state_pybind = native.initial_state(), pybind.initial_state()
    for token in (meta.blank_id, 5, 17):
        p_native, state_native = native.decoder_step(token, state_native)
        p_pybind, state_pybind = pybind.decoder_step(token, state_pybind)
        np.testing.assert_array_equal(p_native, p_pybind.numpy())
        np.testing.assert_array_equal(state_native[1], state_pybind[1].numpy())
        for t in (0, el_native - 1):
            assert native.joint(e_native[:, t : t + 1, :], p_native) == pybind.joint(
                e_pybind[:, t : t + 1, :], p_pybind
            )


def test_cli_runtimes_give_the_same_json_and_native_imports_no_torch(native_lib, exported_xnnpack, jfk_path):
    pte = str(exported_xnnpack / "model.pte")
    outputs = {}
    for runtime in ("native", "pybind"):
        proc = _cli("--model", pte, str(jfk_path), "--format", "json", "--runtime", runtime)
        assert proc.returncode == 0, proc.stderr
        assert f"{runtime} runtime" in proc.stderr  # the load line names it
        outputs[runtime] = proc.stdout
    assert outputs["native"] == outputs["pybind"] and json.loads(outputs["native"])["tokens"]
    code = (
        "import sys; from parakeet_executorch.runtime.cli import main; "
        f"rc = main(['--model', {pte!r}, {str(jfk_path)!r}, '--runtime', 'native', '--threads', '1', '--quiet']); "
        "heavy = [m for m in ('torch', 'hashlib', 'importlib.metadata') if m in sys.modules]; "
        "print(heavy, file=sys.stderr); sys.exit(rc if rc else (3 if heavy else 0))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    # torch is ~370 MiB; hashlib (OpenSSL's libcrypto) and importlib.metadata a few MiB of a peak the runner keeps low
    assert proc.returncode == 0, f"exit {proc.returncode} (3: a module the runner avoids was imported)\n{proc.stderr}"


def test_light_stand_ins_match_the_standard_library():
    """The runner's SHA-256 without hashlib and its executorch version without importlib.metadata."""
    import hashlib
    from importlib.metadata import version

    from parakeet_executorch.pte_format import tokenizer_fingerprint
    from parakeet_executorch.runtime.native_pte_model import _executorch_version

    data = bytes(range(256)) * 1000 + b"tail"
    assert tokenizer_fingerprint(data) == hashlib.sha256(data).hexdigest()
    assert _executorch_version() == version("executorch")


def test_bad_program_and_missing_library_are_one_line_errors(native_lib, tmp_path, exported_xnnpack, jfk_path):
    bad = tmp_path / "model.pte"
    bad.write_bytes(b"not a program" * 100)
    (tmp_path / "tokenizer.model").write_bytes((exported_xnnpack / "tokenizer.model").read_bytes())
    messages = {}
    for runtime in ("native", "pybind"):
        proc = _cli("--model", str(bad), str(jfk_path), "--runtime", runtime)
        assert proc.returncode == 2 and proc.stdout == ""
        lines = [line for line in proc.stderr.splitlines() if "error:" in line]
        assert len(lines) == 1, proc.stderr
        messages[runtime] = lines[0]
    for message in messages.values():
        assert "cannot load" in message and "InvalidProgram" in message and "parakeet-export" in message

    missing = tmp_path / "nowhere" / "libparakeet_pte_c.so"
    proc = _cli(
        "--model",
        str(exported_xnnpack / "model.pte"),
        str(jfk_path),
        "--runtime",
        "native",
        env={"PARAKEET_NATIVE_LIB": str(missing)},
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"PARAKEET_NATIVE_LIB={missing} does not exist" in proc.stderr

    import _ctypes  # a shared library, but not this one: its symbols are missing

    pte = str(exported_xnnpack / "model.pte")
    cases = {
        _ctypes.__file__: "is not a usable native runtime",
        str(tmp_path): "is a folder; point it at libparakeet_pte_c",
    }
    for lib, message in cases.items():
        proc = _cli("--model", pte, str(jfk_path), "--runtime", "native", env={"PARAKEET_NATIVE_LIB": lib})
        assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
        assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr

    # A model path that is a folder, and one that is not UTF-8 (a file name is bytes on Linux)
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/odd\xff.pte"))
    odd.write_bytes((exported_xnnpack / "model.pte").read_bytes())
    (odd.parent / "tokenizer.model").write_bytes((exported_xnnpack / "tokenizer.model").read_bytes())
    for runtime in ("native", "pybind"):
        proc = _cli("--model", str(exported_xnnpack), str(jfk_path), "--runtime", runtime)
        assert proc.returncode == 2 and "is a folder, not a .pte: pass the model.pte inside it" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "parakeet_executorch.runtime.cli", "--model", odd, jfk_path, "--runtime", "native"],
        capture_output=True,
        timeout=600,
    )
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-2000:]


def test_both_runtimes_in_one_process_register_fpa4w_kernels_once(native_lib, tiny_nemo, export_root):
    # Native first, then the bindings, then native again: the kernel library is mapped once, the log hooks of the two
    # runtimes hand over, and neither aborts on a kernel registered twice.
    folder = export_tiny(tiny_nemo, export_root, "xnnpack", "--quantize", "fpa4w")
    code = f"""
import numpy as np
from parakeet_executorch.runtime.native_pte_model import NativePteModel
from parakeet_executorch.runtime.pte_model import PteModel
from parakeet_executorch.runtime.threads import cpu_threads, set_cpu_threads
native = NativePteModel({str(folder / "model.pte")!r})
f, fl = native.preprocessor(np.zeros(16000, np.float32), 16000)
first, _ = native.encoder(f, fl)
pybind = PteModel({str(folder / "model.pte")!r})
second, _ = pybind.encoder(pybind.preprocessor(np.zeros(16000, np.float32), 16000)[0], fl)
third, _ = native.encoder(f, fl)
assert (first == second.numpy()).all() and (first == third).all()
set_cpu_threads(1, "native"); assert cpu_threads("native") == 1 and cpu_threads("pybind") == 1
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_transcribe_cli_fixes_glibcs_mmap_threshold(monkeypatch, exported_xnnpack, jfk_path, capsys):
    from parakeet_executorch.runtime import cli, process_memory

    if sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION"):
        assert process_memory.return_large_buffers_to_the_os() is True  # glibc's mallopt accepted the threshold
    calls = []
    monkeypatch.setattr(cli, "return_large_buffers_to_the_os", lambda: calls.append(1) or True)
    assert cli.main(["--model", str(exported_xnnpack / "model.pte"), str(jfk_path), "--quiet"]) == 0
    assert calls == [1] and capsys.readouterr().out.strip()


def _damaged_copies(src: Path, out: Path, count: int) -> list[Path]:
    """Copies of ``src`` with 1-16 bytes inverted in its first 200 kB (the program's flatbuffer), seeded."""
    import random

    data = src.read_bytes()
    rng = random.Random(0)
    copies = []
    for i in range(count):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 16)):
            damaged[rng.randrange(64, min(len(data), 200_000))] ^= 0xFF
        copies.append(out / f"damaged{i}.pte")
        copies[-1].write_bytes(bytes(damaged))
    return copies


@pytest.mark.usefixtures("cpp_runner")
def test_damaged_programs_are_refused_not_followed(native_lib, exported_xnnpack, tmp_path):
    # Both runtimes of this repository load with the flatbuffer's internal-consistency check (ExecuTorch's default
    # is a minimal one, under which 17 of 40 such copies crashed the C++ runner).
    sample = REPO / "src" / "parakeet_executorch" / "demo_model" / "sample.wav"
    tokenizer = exported_xnnpack / "tokenizer.model"
    for pte in _damaged_copies(exported_xnnpack / "model.pte", tmp_path, 12):
        for argv in (
            [
                str(RUNNER),
                "--model_path",
                str(pte),
                "--tokenizer_path",
                str(tokenizer),
                "--audio_path",
                str(sample),
            ],
            [
                sys.executable,
                "-m",
                "parakeet_executorch.runtime.cli",
                "--model",
                str(pte),
                "--tokenizer",
                str(tokenizer),
                str(sample),
                "--runtime",
                "native",
            ],
        ):
            proc = subprocess.run(argv, capture_output=True, timeout=300)
            err = proc.stderr.decode("ascii")  # the runtime's quotes of damaged bytes come escaped
            assert proc.returncode == 2 and proc.stdout == b"", f"{pte.name}: exit {proc.returncode}\n{err[-2000:]}"
            assert len([line for line in err.splitlines() if "error:" in line]) == 1, err
