"""The .pte contract (pte_format.py) is the one list of methods: the exporter, the Python runner and the C++ runner
all name the same ones."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from parakeet_executorch import pte_format

REPO = Path(__file__).resolve().parents[1]
RUNNER = REPO / "examples" / "parakeet" / "runner"
SRC = REPO / "src" / "parakeet_executorch"


def cpp_name_list(function: str) -> list[str]:
    """The string literals of ``PteModel::<function>()``'s static list in pte_model.cpp, in order."""
    source = (RUNNER / "pte_model.cpp").read_text()
    body = re.search(rf"PteModel::{function}\(\) \{{(.*?)\n\}}", source, re.S)
    assert body, f"PteModel::{function}() not found in pte_model.cpp"
    names = re.search(r"names = \{(.*?)\};", body.group(1), re.S)
    assert names, f"no `names = {{...}};` list in PteModel::{function}()"
    return re.findall(r'"([^"]+)"', names.group(1))


def cpp_metadata_fields() -> list[str]:
    """The data members of the C++ ``struct ModelMetadata`` in pte_model.h, in order (member functions skipped)."""
    header = (RUNNER / "pte_model.h").read_text()
    struct = re.search(r"struct ModelMetadata \{(.*?)\n\};", header, re.S)
    assert struct, "struct ModelMetadata not found in pte_model.h"
    lines = [re.sub(r"//.*", "", line).strip() for line in struct.group(1).splitlines()]
    members = [line for line in lines if line.endswith(";") and "(" not in line]
    return [re.match(r".*?(\w+)\s*(=.*)?;$", line).group(1) for line in members]


def test_cpp_runner_requires_the_same_compute_methods():
    assert cpp_name_list("required_methods") == list(pte_format.REQUIRED_METHODS)
    assert [m.name for m in pte_format.METHODS] == ["preprocessor", "encoder", "decoder_step", "joint"]


def test_cpp_runner_reads_the_same_metadata():
    # The C++ list holds the entries every .pte has; the optional ones are read only when present.
    required = [m for m in pte_format.METADATA_METHODS if m not in pte_format.OPTIONAL_METADATA]
    assert cpp_name_list("metadata_methods") == required
    assert cpp_metadata_fields() == list(pte_format.METADATA_METHODS)
    source = (RUNNER / "pte_model.cpp").read_text()
    for name in pte_format.OPTIONAL_METADATA:
        assert f'names->count("{name}")' in source, f"the C++ runner does not read optional metadata {name}"


def test_compute_methods_are_required_methods():
    assert set(pte_format.COMPUTE_METHODS) < set(pte_format.REQUIRED_METHODS)
    assert "preprocessor" not in pte_format.COMPUTE_METHODS


def test_method_wrappers_take_the_contract_inputs():
    """export/methods.py's forward() arguments are the inputs pte_format names (read from the source, no torch)."""
    tree = ast.parse((SRC / "export" / "methods.py").read_text())
    wrappers = {
        "PreprocessorMethod": "preprocessor",
        "EncoderMethod": "encoder",
        "DecoderStepMethod": "decoder_step",
        "JointMethod": "joint",
    }
    signatures = {m.name: m for m in pte_format.METHODS}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in wrappers:
            forward = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
            args = [a.arg for a in forward.args.args[1:]]
            assert args == [t.name for t in signatures[wrappers[node.name]].inputs], node.name


def test_pte_format_imports_nothing_of_the_package():
    tree = ast.parse((SRC / "pte_format.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and not (node.module or "").startswith("parakeet_executorch"), node.module
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("parakeet_executorch") for a in node.names)


def test_runtime_never_imports_export():
    for path in (SRC / "runtime").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                assert not (node.level >= 2 and module.startswith("export")), f"{path.name} imports ..{module}"
                assert not module.startswith("parakeet_executorch.export"), f"{path.name} imports {module}"


def test_padded_samples_rounds_up_to_whole_hops_and_the_traced_minimum():
    meta = pte_format.ModelMetadata(
        sample_rate=16000,
        window_stride=0.01,
        hop_length=160,
        subsampling_factor=8,
        blank_id=0,
        vocab_size=1,
        min_audio_samples=1600,
    )
    for n, want in [(0, 1600), (1, 1600), (1600, 1600), (1601, 1760), (1760, 1760), (16001, 16160)]:
        got = meta.padded_samples(n)
        assert got == want, (n, got)
        assert got % meta.hop_length == 0 and got >= max(n, meta.min_audio_samples)
