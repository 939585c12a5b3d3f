#!/usr/bin/env bash
# Build the C++ Parakeet runner to cmake-out/examples/parakeet/parakeet_runner against the executorch wheel's
# C++ SDK. Installs nothing: it checks the tools and libraries and says what to install when something is missing
# (.ci/scripts/apt-packages.txt lists the Debian/Ubuntu packages; on macOS: brew install libsndfile libsoxr
# sentencepiece pkg-config cmake).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
PYTHON="${PYTHON:-python}"
BUILD_DIR="${BUILD_DIR:-cmake-out/examples/parakeet}"
JOBS="${JOBS:-2}"

die() { echo "build_parakeet_runner: error: $*" >&2; exit 1; }

command -v "$PYTHON" >/dev/null || die "$PYTHON not found; set PYTHON to the interpreter that has executorch installed"
command -v cmake >/dev/null || die "cmake not found; pip install 'cmake>=3.28'"
cmake_version="$(cmake --version | head -n1 | awk '{print $3}')"
if ! printf '3.28\n%s\n' "$cmake_version" | sort -V -C; then
  die "cmake $cmake_version is too old: the executorch wheel's CMake targets need >= 3.28 (pip install 'cmake>=3.28')"
fi
command -v c++ >/dev/null || command -v g++ >/dev/null || command -v clang++ >/dev/null \
  || die "no C++ compiler found; apt-get install g++ (macOS: xcode-select --install)"
command -v pkg-config >/dev/null || die "pkg-config not found; apt-get install pkg-config (macOS: brew install pkg-config)"

missing_pc=()
declare -A pc_to_apt=([sndfile]=libsndfile1-dev [soxr]=libsoxr-dev [sentencepiece]=libsentencepiece-dev)
declare -A pc_to_brew=([sndfile]=libsndfile [soxr]=libsoxr [sentencepiece]=sentencepiece)
for pc in sndfile soxr sentencepiece; do
  pkg-config --exists "$pc" || missing_pc+=("$pc")
done
if ((${#missing_pc[@]})); then
  apt_names=() brew_names=()
  for pc in "${missing_pc[@]}"; do apt_names+=("${pc_to_apt[$pc]}"); brew_names+=("${pc_to_brew[$pc]}"); done
  die "missing libraries (${missing_pc[*]}). Install: apt-get install ${apt_names[*]} (macOS: brew install ${brew_names[*]}); the full list is .ci/scripts/apt-packages.txt"
fi

ET_DIR="$("$PYTHON" -c 'import executorch, os; print(list(executorch.__path__)[0])' 2>/dev/null)" \
  || die "executorch is not importable by $PYTHON; pip install executorch"
ET_CMAKE="$ET_DIR/lib/cmake/executorch"
[[ -f "$ET_CMAKE/executorch-config.cmake" ]] \
  || die "$ET_CMAKE/executorch-config.cmake not found: this executorch wheel ships no C++ SDK"

# The fpa4w kernels: the same sources as the fpa-lowbit wheel (lowbit/), as a static archive linked in whole so that
# their operators register.
LOWBIT_BUILD="${BUILD_DIR%/}-lowbit"
[[ "$LOWBIT_BUILD" == /* ]] || LOWBIT_BUILD="$REPO/$LOWBIT_BUILD"
cmake -S lowbit -B "$LOWBIT_BUILD" -DCMAKE_BUILD_TYPE=Release -DFPA_LOWBIT_EXECUTORCH=ON \
  -DFPA_LOWBIT_EXECUTORCH_STATIC=ON -DFPA_LOWBIT_CPU_LIBRARY=OFF -Dexecutorch_DIR="$ET_CMAKE" \
  -DPython_EXECUTABLE="$(command -v "$PYTHON")" >/dev/null \
  || die "could not configure the low-bit kernel library (lowbit/CMakeLists.txt)"
cmake --build "$LOWBIT_BUILD" -j "$JOBS" >/dev/null || die "could not build the low-bit kernel library"
LOWBIT_LIB="$LOWBIT_BUILD/libfpa_lowbit_executorch_static.a"
read -r -a extra_args <<< "${PARAKEET_CMAKE_ARGS:-}"
cmake -S examples/parakeet -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$ET_CMAKE" \
  -DPARAKEET_EXTRA_KERNEL_LIBRARIES="$LOWBIT_LIB" "${extra_args[@]}"
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "built $BUILD_DIR/parakeet_runner"
# The Python runner's native runtime (--runtime native) looks for its library in the package it runs from: copied
# there, so an editable install finds it (PARAKEET_NATIVE_LIB names any other build).
NATIVE_LIB=""
for f in "$BUILD_DIR"/libparakeet_pte_c.so "$BUILD_DIR"/libparakeet_pte_c.dylib; do [[ -f "$f" ]] && NATIVE_LIB="$f"; done
[[ -n "$NATIVE_LIB" ]] || die "the native runtime library was not built in $BUILD_DIR"
PKG_RUNTIME="$("$PYTHON" -c 'import importlib.util as u, os; print(os.path.dirname(u.find_spec("parakeet_executorch.runtime").origin))' 2>/dev/null)" || PKG_RUNTIME=""
if [[ -n "$PKG_RUNTIME" && -w "$PKG_RUNTIME" ]]; then
  dest="$PKG_RUNTIME/lib/$(basename "$NATIVE_LIB")"
  mkdir -p "$PKG_RUNTIME/lib"
  # Replaced by a rename, never rewritten in place: a process that has the library loaded (a test session that
  # rebuilds the runner) keeps its mapping of the old file instead of crashing on the new bytes.
  if ! cmp -s "$NATIVE_LIB" "$dest"; then
    cp "$NATIVE_LIB" "$dest.tmp.$$" && mv -f "$dest.tmp.$$" "$dest"
  fi
  echo "installed $NATIVE_LIB into $PKG_RUNTIME/lib (the Python runner's --runtime native)"
else
  echo "built $NATIVE_LIB; parakeet_executorch is not installed here: set PARAKEET_NATIVE_LIB to use it"
fi
