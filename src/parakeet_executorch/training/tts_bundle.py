"""Carry the training synthesizers (espeak-ng, flite) to a machine without them, as Debian packages.

``python -m parakeet_executorch.training.tts_bundle pack DIR`` (on a Debian 12 machine with apt and gcc) downloads
the packages training needs into ``DIR`` with ``apt-get download`` and builds ``DIR/libpcaudio.so.0``, a stub of
espeak-ng's audio-output library: the real one pulls in PulseAudio's whole client stack, and writing WAV data to
stdout never calls it. ``... unpack DIR PREFIX`` (anywhere, no dpkg or root needed: the ``.deb`` files are read with
Python's ``ar`` parsing and ``tarfile``) extracts them into ``PREFIX``, adds the stub, rewrites absolute symlinks into
the prefix, and checks that both programs run with ``PARAKEET_TTS_PREFIX=PREFIX`` (``synth.py`` then finds the
programs, their libraries and espeak-ng's data there).

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
LIBDIR = Path("usr/lib/x86_64-linux-gnu")
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


def pack(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", *PACKAGES], cwd=folder, check=True)
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
    os.environ["PARAKEET_TTS_PREFIX"] = str(prefix)
    from .synth import Voice, synthesize, versions

    print(versions(["espeak", "flite"]))
    for voice in (Voice("espeak", "en-us"), Voice("flite", "slt")):
        audio = synthesize("the prefix works", voice)
        print(f"{voice.describe()}: {len(audio) / 16000:.2f} s of audio")
    print(f"export PARAKEET_TTS_PREFIX={prefix}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("pack", help="apt-get download the packages and build the pcaudio stub into DIR")
    sp.add_argument("dir", type=Path)
    su = sub.add_parser("unpack", help="extract DIR's packages into PREFIX and check that they run")
    su.add_argument("dir", type=Path)
    su.add_argument("prefix", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "pack":
        pack(args.dir)
    else:
        unpack(args.dir, args.prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main())
