"""export/cache.py: a second export of the same model file and options is copied from the user cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PARAKEET_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _fake_export(calls):
    """Stands in for parakeet-export's main: writes the three files, their bytes naming the call."""

    def export(argv):
        out = Path(argv[argv.index("--output-dir") + 1])
        out.mkdir(parents=True, exist_ok=True)
        calls.append(argv)
        for name in ("model.pte", "tokenizer.model", "export_report.json"):
            (out / name).write_text(f"{name} {len(calls)}")
        return 0

    return export


def test_second_export_comes_from_the_cache(tmp_path, cache_dir, capsys):
    from parakeet_executorch.export.cache import cached_export

    model = tmp_path / "m.nemo"
    model.write_bytes(b"model one")
    calls: list = []
    export = _fake_export(calls)
    assert cached_export(str(model), "xnnpack", tmp_path / "a", export=export) == 0
    assert cached_export(str(model), "xnnpack", tmp_path / "b", export=export) == 0
    assert len(calls) == 1
    assert "cached" in capsys.readouterr().out
    for name in ("model.pte", "tokenizer.model", "export_report.json"):
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "a" / name).read_bytes()
    (entry,) = (cache_dir / "exports").iterdir()
    key = json.loads((entry / "key.json").read_text())
    assert key["backend"] == "xnnpack" and key["recipe"] == "none" and len(key["model_sha256"]) == 64
    assert not [p for p in (cache_dir / "exports").iterdir() if p.name.startswith(".")]  # no partial entry left

    # Another recipe, another backend, other model bytes, or --no-cache: exported again.
    assert cached_export(str(model), "xnnpack", tmp_path / "c", ["--quantize", "8da4w"], export=export) == 0
    assert cached_export(str(model), "portable", tmp_path / "d", export=export) == 0
    model.write_bytes(b"model two")
    assert cached_export(str(model), "xnnpack", tmp_path / "e", export=export) == 0
    assert cached_export(str(model), "xnnpack", tmp_path / "f", use_cache=False, export=export) == 0
    assert len(calls) == 5
    assert (
        json.loads(
            next(p for p in (cache_dir / "exports").iterdir() if "8da4w" in (p / "key.json").read_text())
            .joinpath("key.json")
            .read_text()
        )["recipe"]
        == "8da4w"
    )


def test_failed_export_is_not_cached(tmp_path, cache_dir):
    from parakeet_executorch.export.cache import cached_export

    model = tmp_path / "m.nemo"
    model.write_bytes(b"model")
    assert cached_export(str(model), "xnnpack", tmp_path / "a", export=lambda argv: 2) == 2
    assert not (cache_dir / "exports").exists() or not list((cache_dir / "exports").iterdir())


def test_old_entries_are_pruned(tmp_path, cache_dir, monkeypatch):
    from parakeet_executorch.export import cache

    monkeypatch.setattr(cache, "KEEP", 2)
    calls: list = []
    for i in range(4):
        model = tmp_path / f"m{i}.nemo"
        model.write_bytes(b"model %d" % i)
        assert cache.cached_export(str(model), "xnnpack", tmp_path / str(i), export=_fake_export(calls)) == 0
    assert len(list((cache_dir / "exports").iterdir())) == 2


def test_source_hash_follows_the_sources_but_not_the_native_runtime(tmp_path, monkeypatch):
    from parakeet_executorch.export import cache

    package = tmp_path / "parakeet_executorch"
    (package / "export").mkdir(parents=True)
    (package / "runtime" / "lib").mkdir(parents=True)
    (package / "export" / "cache.py").write_text("# cache\n")
    native = package / "runtime" / "lib" / "libparakeet_pte_c.so"
    native.write_bytes(b"build 1")
    monkeypatch.setattr(cache, "__file__", str(package / "export" / "cache.py"))
    first = cache._source_hash()
    native.write_bytes(b"build 2")  # a rebuilt runtime library does not make the cached exports stale
    assert cache._source_hash() == first
    (package / "export" / "cache.py").write_text("# cache, changed\n")
    assert cache._source_hash() != first
