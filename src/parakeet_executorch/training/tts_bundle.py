"""Carry the training synthesizers (espeak-ng, flite; MBROLA, RHVoice, SVOX Pico) to a machine without them, as
Debian packages.

``python -m parakeet_executorch.training.tts_bundle pack DIR`` (on a Debian 12 machine with apt and gcc) downloads
the packages training needs into ``DIR`` with ``apt-get download`` and builds ``DIR/libpcaudio.so.0``, a stub of
espeak-ng's audio-output library: the real one pulls in PulseAudio's whole client stack, and writing WAV data to
stdout never calls it. ``pack --extra DIR2`` downloads the packages of the extra synthesizers (``corpus.py``'s
``extra_voice_fraction``; Debian's contrib and non-free components must be in apt's sources) into a folder of its
own, since both together exceed what one transfer to the lent GPU machine may carry. ``... unpack DIR PREFIX``
(anywhere, no dpkg or root needed: the ``.deb`` files are read with Python's ``ar`` parsing and ``tarfile``; run it
once per folder) extracts them into ``PREFIX``, adds the stub, rewrites absolute symlinks into the prefix, makes the
data paths compiled into the programs reachable (below), and checks that the programs it unpacked run with
``PARAKEET_TTS_PREFIX=PREFIX`` (``synth.py`` then finds the programs, their libraries and data there).

Two programs only look for their data at a path fixed at build time: espeak-ng looks for MBROLA voices in its own
data folder first (``espeak-ng-data/mbrola/NAME``), so the voices are linked there; ``pico2wave`` only reads
``/usr/share/pico/lang/``, so the unpacked copy has that string replaced by a link of the same length under /tmp
(``PICO_LANG_LINK``) that points into the prefix.

Festival is not carried: it only makes the held-out test sets, which are synthesized where it is installed.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

PACKAGES = ["espeak-ng", "libespeak-ng1", "espeak-ng-data", "libsonic0", "flite", "libflite1", "libasound2"]
EXTRA_PACKAGES = [
    "mbrola",
    "mbrola-us1",
    "mbrola-us2",
    "mbrola-us3",
    "mbrola-en1",
    "rhvoice-english",
    "librhvoice5",
    "librhvoice-core7",
    "libttspico-utils",
    "libttspico0",
    "libttspico-data",
    "libpopt0",
]
LIBDIR = Path("usr/lib/x86_64-linux-gnu")
PICO_LANG = b"/usr/share/pico/lang/"
# Same length as PICO_LANG, so the patched binary's string table keeps its layout.
PICO_LANG_LINK = b"/tmp/parakeet-picolg/"
assert len(PICO_LANG_LINK) == len(PICO_LANG)
PCAUDIO_STUB = r"""
/* Stub of libpcaudio.so.0 for espeak-ng writing WAV data (--stdout, -w): no audio device is ever opened. */
#include <stddef.h>
struct audio_object;
struct audio_object *create_audio_device_object(const char *d, const char *a, const char *n) { return NULL; }
int audio_object_open(struct audio_object *o, int f, unsigned r, unsigned char c) { return -1; }
void audio_object_close(struct audio_object *o) {}
void audio_object_destroy(struct audio_object *o) {}
int audio_object_write(struct audio_object *o, const void *d, size_t n) { return -1; }
int audio_object_drain(struct audio_object *o) { return -1; }
int audio_object_flush(struct audio_object *o) { return -1; }
const char *audio_object_strerror(struct audio_object *o, int e) { return "pcaudio stub: no audio output"; }
"""


def pack(folder: Path, extra: bool = False) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", *(EXTRA_PACKAGES if extra else PACKAGES)], cwd=folder, check=True)
    if extra:
        for p in sorted(folder.iterdir()):
            print(f"{p.stat().st_size / 1e6:7.2f} MB  {p.name}")
        return
    src = folder / "pcaudio_stub.c"
    src.write_text(PCAUDIO_STUB)
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-O2",
            "-Wl,-soname,libpcaudio.so.0",
            "-o",
            str(folder / "libpcaudio.so.0"),
            str(src),
        ],
        check=True,
    )
    src.unlink()
    for p in sorted(folder.iterdir()):
        print(f"{p.stat().st_size / 1e6:7.2f} MB  {p.name}")


def _deb_data(deb: Path) -> tuple[bytes, str]:
    """The data.tar.* member of a .deb (an ar archive) and its name."""
    blob = deb.read_bytes()
    if not blob.startswith(b"!<arch>\n"):
        raise ValueError(f"{deb} is not a .deb (ar) archive")
    pos = 8
    while pos < len(blob):
        header = blob[pos : pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        if name.startswith("data.tar"):
            return blob[pos + 60 : pos + 60 + size], name
        pos += 60 + size + (size % 2)
    raise ValueError(f"{deb} has no data.tar member")


def link_data_paths(prefix: Path, pico_link: bytes = PICO_LANG_LINK) -> None:
    """Make the data that MBROLA voices and ``pico2wave`` look for at build-time paths reachable from ``prefix``.

    Links each unpacked MBROLA voice (``usr/share/mbrola/NAME/NAME``) into espeak-ng's data folder
    (``usr/lib/x86_64-linux-gnu/espeak-ng-data/mbrola/NAME``), where espeak-ng looks first; replaces
    ``/usr/share/pico/lang/`` in the unpacked ``pico2wave`` by ``pico_link`` (same length) and points that link at
    the prefix's ``usr/share/pico/lang``. Does nothing for what is not unpacked; safe to repeat.

    Raises:
        ValueError: ``pico_link`` is not as long as ``/usr/share/pico/lang/``.
    """
    if len(pico_link) != len(PICO_LANG) or not pico_link.endswith(b"/"):
        raise ValueError(f"pico_link must be {len(PICO_LANG)} bytes ending in '/', got {pico_link!r}")
    mbrola = prefix / "usr/share/mbrola"
    if mbrola.is_dir():
        (prefix / LIBDIR / "espeak-ng-data/mbrola").mkdir(parents=True, exist_ok=True)
        for voice_dir in sorted(d for d in mbrola.iterdir() if (d / d.name).is_file()):
            link = prefix / LIBDIR / "espeak-ng-data/mbrola" / voice_dir.name
            if link.is_symlink() or link.exists():
                link.unlink()
            os.symlink(voice_dir / voice_dir.name, link)
    pico2wave = prefix / "usr/bin/pico2wave"
    if pico2wave.is_file():
        blob = pico2wave.read_bytes()
        if PICO_LANG in blob:
            pico2wave.write_bytes(blob.replace(PICO_LANG, pico_link))
        link = Path(pico_link.decode().rstrip("/"))
        if link.is_symlink():
            link.unlink()
        os.symlink(prefix / "usr/share/pico/lang", link)


def unpack(folder: Path, prefix: Path) -> None:
    prefix = prefix.resolve()
    debs = sorted(folder.glob("*.deb"))
    if not debs:
        raise SystemExit(f"no .deb files in {folder}")
    for deb in debs:
        data, _ = _deb_data(deb)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for m in tar.getmembers():
                dest = prefix / m.name.lstrip("./")
                if m.issym():
                    # Absolute links point into the system; make them point into the prefix instead.
                    target = str(prefix / m.linkname.lstrip("/")) if m.linkname.startswith("/") else m.linkname
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    if dest.is_symlink() or dest.exists():
                        dest.unlink()
                    os.symlink(target, dest)
                elif m.isdir():
                    dest.mkdir(parents=True, exist_ok=True)
                elif m.isfile():
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    member = tar.extractfile(m)
                    assert member is not None  # a regular file member always has contents
                    dest.write_bytes(member.read())
                    dest.chmod(m.mode & 0o777 | 0o600)
    stub = folder / "libpcaudio.so.0"
    if stub.is_file():
        (prefix / LIBDIR).mkdir(parents=True, exist_ok=True)
        (prefix / LIBDIR / "libpcaudio.so.0").write_bytes(stub.read_bytes())
    link_data_paths(prefix)
    os.environ["PARAKEET_TTS_PREFIX"] = str(prefix)
    from .synth import Voice, synthesize, versions

    synths = [
        synth
        for synth, marker in (
            ("espeak", "usr/bin/espeak-ng"),
            ("flite", "usr/bin/flite"),
            ("mbrola", "usr/bin/mbrola"),
            ("rhvoice", "usr/lib/x86_64-linux-gnu/libRHVoice.so.5"),
            ("pico", "usr/bin/pico2wave"),
        )
        if (prefix / marker).exists()
    ]
    print(versions(synths))
    examples = {
        "espeak": Voice("espeak", "en-us"),
        "flite": Voice("flite", "slt"),
        "mbrola": Voice("mbrola", "us2"),
        "rhvoice": Voice("rhvoice", "bdl"),
        "pico": Voice("pico", "en-GB"),
    }
    for voice in (examples[s] for s in synths):
        audio = synthesize("the prefix works", voice)
        print(f"{voice.describe()}: {len(audio) / 16000:.2f} s of audio")
    print(f"export PARAKEET_TTS_PREFIX={prefix}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("pack", help="apt-get download the packages and build the pcaudio stub into DIR")
    sp.add_argument("dir", type=Path)
    sp.add_argument("--extra", action="store_true", help="the extra synthesizers' packages (MBROLA, RHVoice, Pico)")
    su = sub.add_parser("unpack", help="extract DIR's packages into PREFIX and check that they run")
    su.add_argument("dir", type=Path)
    su.add_argument("prefix", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "pack":
        pack(args.dir, extra=args.extra)
    else:
        unpack(args.dir, args.prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main())
