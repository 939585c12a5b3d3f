#!/usr/bin/env bash
# Build ExecuTorch from source with the Metal backend, at the revision of the pinned executorch wheel, and the C++
# runner against it. No executorch wheel ships the Metal delegate (the macOS arm64 wheel has XNNPACK, Core ML and
# MLX), so a Metal .pte needs this build to run, in Python and in the C++ runner alike.
#
#   bash backends/metal/build_runtime_macos.sh [--python | --print-config]
#
# --print-config prints the revision and the resolved paths and exits, on any host, without building anything.
# Steps (each skipped when its output exists; delete the folder to redo it):
#   1. clone pytorch/executorch at the wheel's git revision (executorch.version.git_version; 1.5.1's is
#      3b60683923245cf472b7323426920e15623ba361) into $ET_SRC, with submodules;
#   2. configure and install its C++ runtime with -DEXECUTORCH_BUILD_METAL=ON (plus XNNPACK, the optimized and
#      quantized kernels and the module/tensor/data-loader extensions the runner uses) into $ET_PREFIX;
#   3. with --python: replace the installed executorch wheel by this checkout built with the Metal backend
#      (CMAKE_ARGS=-DEXECUTORCH_BUILD_METAL=ON pip install --no-build-isolation), so the Python runner loads
#      Metal programs too;
#   4. build the runner with -DPARAKEET_METAL=ON into $RUNNER_BUILD (the Metal delegate linked whole).
# Environment: PYTHON (default python), ET_SRC (default build/executorch-metal/executorch; ExecuTorch's CMake
# build requires the checkout's folder to be named executorch), ET_PREFIX (default build/executorch-metal/install),
# RUNNER_BUILD (default cmake-out/examples/parakeet-metal), JOBS. Relative paths are taken from the repository root.
# Needs: Xcode's command-line tools, cmake >= 3.29, Homebrew's libsndfile libsoxr sentencepiece pkg-config, and
# the Python stack of this repository (pip install -e ".[export]"), whose torch the Metal backend links (libomp).
# Not yet run on Apple hardware (see backends/metal/README.md).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
# Every path is made absolute up front: pip runs inside $ET_SRC, and find_package does not look a relative
# CMAKE_PREFIX_PATH up from the directory cmake was started in. Nothing is created here, so a refused run leaves
# no folders behind.
abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$REPO/${1#./}" ;; esac; }
PYTHON="${PYTHON:-python}"
case "$PYTHON" in */*) PYTHON="$(abspath "$PYTHON")" ;; esac  # a path, not a command name looked up in PATH
ET_SRC="$(abspath "${ET_SRC:-build/executorch-metal/executorch}")"
ET_PREFIX="$(abspath "${ET_PREFIX:-build/executorch-metal/install}")"
RUNNER_BUILD="$(abspath "${RUNNER_BUILD:-cmake-out/examples/parakeet-metal}")"
JOBS="${JOBS:-$(sysctl -n hw.ncpu 2>/dev/null || echo 4)}"
PINNED_REV=3b60683923245cf472b7323426920e15623ba361  # executorch 1.5.1
CMAKE_MIN=3.29  # backends/apple/metal/CMakeLists.txt in ExecuTorch asks for it

die() { echo "build_runtime_macos: error: $*" >&2; exit 1; }

WITH_PYTHON=0
case "${1:-}" in
  "") ;;
  --python) WITH_PYTHON=1 ;;
  --print-config)
    printf 'PINNED_REV=%s\nPYTHON=%s\nET_SRC=%s\nET_PREFIX=%s\nRUNNER_BUILD=%s\n' \
      "$PINNED_REV" "$PYTHON" "$ET_SRC" "$ET_PREFIX" "$RUNNER_BUILD"
    exit 0
    ;;
  *) echo "usage: $0 [--python | --print-config]" >&2; exit 2 ;;
esac
[ "$(basename "$ET_SRC")" = executorch ] \
  || die "ET_SRC must end in a folder named executorch (ExecuTorch's CMakeLists.txt refuses any other), got $ET_SRC"

if [ "$(uname -s)" != Darwin ] || [ "$(uname -m)" != arm64 ]; then
  die "the Metal backend builds only on macOS on Apple silicon; this host is $(uname -s) $(uname -m)"
fi
command -v cmake >/dev/null || die "cmake not found; pip install 'cmake>=$CMAKE_MIN'"
cmake_version="$(cmake --version | head -n1 | awk '{print $3}')"
if ! printf '%s\n%s\n' "$CMAKE_MIN" "$cmake_version" | sort -V -C; then
  die "cmake $cmake_version is too old: ExecuTorch's Metal backend needs >= $CMAKE_MIN" \
    "(pip install 'cmake>=$CMAKE_MIN')"
fi
command -v git >/dev/null || die "git not found; install Xcode's command-line tools (xcode-select --install)"

rev="$("$PYTHON" -c 'import executorch.version as v; print(v.git_version)' 2>/dev/null || true)"
if [ -z "$rev" ]; then
  rev="$PINNED_REV"
  echo "executorch is not installed in $PYTHON; building the pinned revision $rev"
elif [ "$rev" != "$PINNED_REV" ]; then
  echo "note: the installed executorch was built from $rev, not the pinned $PINNED_REV; building $rev"
fi

if [ ! -d "$ET_SRC/.git" ]; then
  echo "::group::clone executorch at $rev"
  mkdir -p "$(dirname "$ET_SRC")"
  git clone --filter=blob:none https://github.com/pytorch/executorch.git "$ET_SRC"
  git -C "$ET_SRC" checkout --quiet "$rev"
  git -C "$ET_SRC" submodule update --init --recursive --depth 1
  echo "::endgroup::"
fi
[ "$(git -C "$ET_SRC" rev-parse HEAD)" = "$rev" ] || die "$ET_SRC is not at $rev; delete it to clone again"

if [ ! -f "$ET_PREFIX/lib/cmake/ExecuTorch/executorch-config.cmake" ] \
  && [ ! -f "$ET_PREFIX/lib/cmake/executorch/executorch-config.cmake" ]; then
  echo "::group::ExecuTorch runtime with Metal -> $ET_PREFIX"
  cmake -S "$ET_SRC" -B "$ET_SRC/cmake-out" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$ET_PREFIX" \
    -DCMAKE_PREFIX_PATH="$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
    -DPYTHON_EXECUTABLE="$(command -v "$PYTHON")" \
    -DEXECUTORCH_BUILD_METAL=ON \
    -DEXECUTORCH_BUILD_XNNPACK=ON \
    -DEXECUTORCH_BUILD_KERNELS_OPTIMIZED=ON \
    -DEXECUTORCH_BUILD_KERNELS_QUANTIZED=ON \
    -DEXECUTORCH_BUILD_EXTENSION_MODULE=ON \
    -DEXECUTORCH_BUILD_EXTENSION_TENSOR=ON \
    -DEXECUTORCH_BUILD_EXTENSION_DATA_LOADER=ON \
    -DEXECUTORCH_BUILD_EXTENSION_FLAT_TENSOR=ON \
    -DEXECUTORCH_BUILD_EXTENSION_NAMED_DATA_MAP=ON
  cmake --build "$ET_SRC/cmake-out" --target install -j "$JOBS"
  echo "::endgroup::"
fi

if [ "$WITH_PYTHON" = 1 ]; then
  echo "::group::executorch Python package with Metal (replaces the installed wheel)"
  (cd "$ET_SRC" && CMAKE_ARGS="-DEXECUTORCH_BUILD_METAL=ON" "$PYTHON" -m pip install --no-build-isolation .)
  echo "::endgroup::"
fi

echo "::group::parakeet runner with the Metal delegate -> $RUNNER_BUILD"
cmake -S examples/parakeet -B "$RUNNER_BUILD" -DCMAKE_BUILD_TYPE=Release -DPARAKEET_METAL=ON \
  -DCMAKE_PREFIX_PATH="$ET_PREFIX/lib/cmake;$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
cmake --build "$RUNNER_BUILD" -j "$JOBS"
echo "::endgroup::"
echo "built $RUNNER_BUILD/parakeet_runner (Metal delegate linked)"
