#!/usr/bin/env bash
# clang-tidy (.clang-tidy's checks) over the C++ runner (examples/parakeet) and the low-bit kernels
# (lowbit/csrc). It only configures the two CMake projects, for their compile_commands.json
# (under cmake-out/clang-tidy/), and builds nothing; it needs what build_parakeet_runner.sh needs (the executorch
# wheel, pkg-config and the libraries of .ci/scripts/apt-packages.txt). It takes a few minutes on two cores, so
# lint.sh leaves it out. Exits non-zero when clang-tidy reports a warning.
#   bash .ci/scripts/clang_tidy.sh [FILE...]     (default: every .cpp of the two projects)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
PYTHON="${PYTHON:-python}"
OUT="cmake-out/clang-tidy"

die() { echo "clang_tidy: error: $*" >&2; exit 1; }
command -v clang-tidy >/dev/null || die "clang-tidy not found; pip install -r third-party/requirements-test.txt"
ET_DIR="$("$PYTHON" -c 'import executorch; print(list(executorch.__path__)[0])' 2>/dev/null)" \
  || die "executorch is not importable by $PYTHON"
ET_CMAKE="$ET_DIR/lib/cmake/executorch"

cmake -S examples/parakeet -B "$OUT/runner" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_PREFIX_PATH="$ET_CMAKE" >/dev/null
cmake -S lowbit -B "$OUT/lowbit" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DFPA_LOWBIT_EXECUTORCH=ON \
  -Dexecutorch_DIR="$ET_CMAKE" -DPython_EXECUTABLE="$(command -v "$PYTHON")" >/dev/null

if (($#)); then
  files=("$@")
else
  mapfile -t files < <(git ls-files 'examples/parakeet/*.cpp' 'lowbit/csrc/*.cpp')
fi
status=0
for f in "${files[@]}"; do
  case "$f" in
    lowbit/csrc/*) db="$OUT/lowbit" ;;
    *) db="$OUT/runner" ;;
  esac
  out="$(clang-tidy --quiet -p "$db" "$f" 2>/dev/null)" || status=1
  if grep -q "warning:\|error:" <<< "$out"; then
    printf '%s\n' "$out"
    status=1
  fi
done
if ((status == 0)); then echo "clang-tidy: no findings in ${#files[@]} files"; fi
exit "$status"
