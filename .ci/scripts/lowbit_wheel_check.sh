#!/usr/bin/env bash
# fpa-lowbit as a user gets it: build its wheel here, install it into a fresh virtual environment where no compiler
# and no cmake can run, and there run the low-bit tests and an fpa4w .pte of the demo model through the Python and
# C++ runners (exact transcript). Also compiles the arm64 NEON level with the cross compiler (it cannot run here).
# Expects .ci/scripts/install.sh to have run. Work files go to cmake-out/lowbit-wheel-check/.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
OUT="$REPO/cmake-out/lowbit-wheel-check"
PYTHON="${PYTHON:-python3}"
rm -rf "$OUT"
mkdir -p "$OUT/dist" "$OUT/no-compilers"

echo "lowbit_wheel_check: the NEON level, cross-compiled for arm64"
if command -v aarch64-linux-gnu-g++ >/dev/null; then
  for f in dispatch kernel_portable kernel_neon c_api; do
    aarch64-linux-gnu-g++ -std=c++17 -O2 -fPIC -ffp-contract=fast -Wall -Werror -c "lowbit/csrc/$f.cpp" -o "$OUT/$f.arm64.o"
  done
  aarch64-linux-gnu-g++ -shared -o "$OUT/libfpa_lowbit_cpu.arm64.so" "$OUT"/*.arm64.o -lpthread
  echo "  compiled: $OUT/libfpa_lowbit_cpu.arm64.so"
else
  echo "lowbit_wheel_check: error: aarch64-linux-gnu-g++ not found (apt-get install g++-aarch64-linux-gnu)" >&2
  exit 1
fi

echo "lowbit_wheel_check: building the wheel (with its ExecuTorch kernels)"
FPA_LOWBIT_EXECUTORCH=ON "$PYTHON" -m pip wheel -q --no-deps --no-build-isolation ./lowbit -w "$OUT/dist"
wheel="$(ls "$OUT"/dist/fpa_lowbit-*.whl)"
echo "  $wheel"

echo "lowbit_wheel_check: an fpa4w .pte of the demo model (exported in the development environment)"
demo() { "$PYTHON" -c "from parakeet_executorch import demo; print(demo.$1)"; }
"$PYTHON" -m parakeet_executorch.export.cli --model "$(demo DEMO_MODEL)" \
  --backend xnnpack --quantize fpa4w --output-dir "$OUT/demo_fpa4w" >"$OUT/export.log" 2>&1 \
  || { tail -20 "$OUT/export.log" >&2; exit 1; }
sample="$(demo DEMO_AUDIO)"
expected="$(demo 'DEMO_TEXT.read_text().strip()')"

echo "lowbit_wheel_check: a fresh virtual environment without compilers"
"$PYTHON" -m venv "$OUT/venv"
VPY="$OUT/venv/bin/python"
pins() { grep -E "^($(IFS='|'; echo "$*"))==" third-party/requirements.txt third-party/requirements-test.txt | cut -d: -f2; }
mapfile -t deps < <(pins torch torchao executorch soundfile soxr sentencepiece tqdm pytest)
"$VPY" -m pip install -q "${deps[@]}" "numpy<2.5" "$wheel"
"$VPY" -m pip install -q --no-deps -e .
# Every compiler and cmake on PATH answers with an error: a build at import or first use would fail loudly.
for tool in cmake c++ g++ gcc cc clang clang++ ld; do
  printf '#!/bin/sh\necho "lowbit_wheel_check: %s was called, but nothing may be compiled here" >&2\nexit 127\n' \
    "$tool" >"$OUT/no-compilers/$tool"
  chmod +x "$OUT/no-compilers/$tool"
done
export PATH="$OUT/no-compilers:$OUT/venv/bin:$PATH"
"$VPY" -c 'import importlib.util as u; assert u.find_spec("cmake") is None, "cmake is importable in the clean venv"'

echo "lowbit_wheel_check: low-bit tests in the clean environment"
"$VPY" -m pytest -q -p no:cacheprovider tests/test_lowbit.py tests/test_lowbit_native.py tests/test_lowbit_executorch.py

echo "lowbit_wheel_check: the fpa4w .pte through both runners (Python on each of its runtimes)"
# pybind: the wheel's kernels under this venv's ExecuTorch bindings; native: the same kernels beside the native
# runtime library (built with the C++ runner, found through the editable install).
py_text() {
  "$VPY" -m parakeet_executorch.runtime.cli --model "$OUT/demo_fpa4w/model.pte" \
    --tokenizer "$OUT/demo_fpa4w/tokenizer.model" "$sample" --quiet --runtime "$1"
}
pybind_text="$(py_text pybind)"
native_text="$(py_text native)"
cpp_text="$("$REPO/cmake-out/examples/parakeet/parakeet_runner" --model_path "$OUT/demo_fpa4w/model.pte" \
  --tokenizer_path "$OUT/demo_fpa4w/tokenizer.model" --audio_path "$sample" 2>/dev/null)"
for pair in "python pybind:$pybind_text" "python native:$native_text" "c++:$cpp_text"; do
  if [ "${pair#*:}" != "$expected" ]; then
    echo "lowbit_wheel_check: error: ${pair%%:*} runner heard '${pair#*:}', expected '$expected'" >&2
    exit 1
  fi
done
echo "lowbit_wheel_check: both runners heard '$expected' from the fpa4w .pte; no compiler was needed"
