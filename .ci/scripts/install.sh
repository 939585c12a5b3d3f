#!/usr/bin/env bash
# Install everything the project needs on a fresh Debian/Ubuntu machine: apt packages (the C++ runner's libraries,
# espeak-ng, flite and festival for the demo model's synthetic speech, MBROLA, RHVoice and Pico from Debian's
# non-free for its extra training voices, fortunes for its sentences), the pinned
# Python stack (third-party/), the fpa-lowbit wheel built from lowbit/, this package in editable mode, then build
# the C++ runner.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
mapfile -t apt_packages < .ci/scripts/apt-packages.txt
missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# The demo model's extra training synthesizers (MBROLA, RHVoice, SVOX Pico) live in Debian's contrib and non-free
# components, which a fresh Debian machine's sources often leave out: add them (same mirror, same release).
mapfile -t nonfree_packages < .ci/scripts/apt-packages-nonfree.txt
for p in "${nonfree_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install: apt packages: ${missing[*]}"
  # shellcheck disable=SC1091  # the machine's own release file
  . /etc/os-release
  if [ "${ID:-}" = debian ] && ! apt-cache policy 2>/dev/null | grep -q "c=non-free,"; then
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: contrib non-free\nSigned-By: %s\n' \
      "$VERSION_CODENAME" /usr/share/keyrings/debian-archive-keyring.gpg |
      $SUDO tee /etc/apt/sources.list.d/parakeet-nonfree.sources >/dev/null
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

python3 -m pip install -q torch==2.13.0
# fpa-lowbit (lowbit/) first: parakeet-executorch depends on it. Built without isolation against the pinned
# executorch, so that its wheel carries the ExecuTorch kernels (FPA_LOWBIT_EXECUTORCH=ON: their absence is an error).
python3 -m pip install -q -r third-party/requirements-lowbit-build.txt
FPA_LOWBIT_EXECUTORCH=ON python3 -m pip install -q --no-build-isolation ./lowbit
python3 -m pip install -q -e ".[export,test,bench,scale]"
bash .ci/scripts/build_parakeet_runner.sh
