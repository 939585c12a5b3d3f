#!/usr/bin/env bash
# macOS (Apple silicon) end-to-end run of the Metal backend, as .github/workflows/metal.yml calls it:
# install (Homebrew libraries, Python stack), export for --backend metal, build the C++ runner, transcribe AUDIO and
# check the transcript against EXPECTED_PHRASE: by default it must contain it (case and punctuation ignored); with
# E2E_MATCH=exact it must equal it.
#
#   bash backends/metal/run_e2e_macos.sh MODEL_ID QUANT_NAME AUDIO EXPECTED_PHRASE [OUTPUT_DIR]
#
# MODEL_ID     e.g. nvidia/parakeet-tdt-0.6b-v3 (or a .nemo file)
# QUANT_NAME   non-quantized | quantized-int4-metal | quantized-8w (see .ci/scripts/export_model_artifact.sh)
# OUTPUT_DIR   default artifacts/BACKEND-QUANT_NAME
# Environment: PYTHON (default python), SKIP_INSTALL=1 (skip brew/pip), EXPORT_EXTRA_ARGS (passed on to
# parakeet-export, e.g. "--dtype bf16"), BACKEND (metal, the default, or mlx: ExecuTorch's MLX delegate, which the
# macOS wheel ships, so no source build), E2E_MATCH (contains, the default, or exact: passed on to
# .ci/scripts/test_model_e2e.sh).
# Not yet run on Apple hardware from this repository's CI (see backends/metal/README.md).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
PYTHON="${PYTHON:-python}"
export PYTHON

die() { echo "run_e2e_macos: error: $*" >&2; exit 1; }

if [ "$#" -lt 4 ] || [ "$#" -gt 5 ]; then
  echo "usage: $0 MODEL_ID QUANT_NAME AUDIO EXPECTED_PHRASE [OUTPUT_DIR]" >&2
  exit 2
fi
MODEL_ID="$1"
QUANT_NAME="$2"
AUDIO="$3"
EXPECTED_PHRASE="$4"
BACKEND="${BACKEND:-metal}"
OUTPUT_DIR="${5:-artifacts/$BACKEND-$QUANT_NAME}"
# contains by default: a phrase from the middle of a long clip survives small differences at its ends.
E2E_MATCH="${E2E_MATCH:-contains}"
export E2E_MATCH
case "$BACKEND" in metal | mlx) ;; *) die "BACKEND must be metal or mlx, got '$BACKEND'" ;; esac
case "$E2E_MATCH" in exact | contains) ;; *) die "E2E_MATCH must be exact or contains, got '$E2E_MATCH'" ;; esac

if [ "$(uname -s)" != Darwin ] || [ "$(uname -m)" != arm64 ]; then
  die "this script is for macOS on Apple silicon; this host is $(uname -s) $(uname -m)"
fi
[ -f "$AUDIO" ] || die "$AUDIO: no such audio file"
[ -n "$EXPECTED_PHRASE" ] || die "EXPECTED_PHRASE is empty"

if [ "${SKIP_INSTALL:-0}" != 1 ]; then
  echo "::group::install"
  command -v brew >/dev/null || die "Homebrew not found (https://brew.sh)"
  # bash: the runner build script needs bash >= 4 (associative arrays); macOS ships 3.2.
  brew install libsndfile libsoxr sentencepiece pkg-config bash
  "$PYTHON" -m pip install torch==2.13.0
  "$PYTHON" -m pip install -e ".[export,test]"
  "$PYTHON" -m pip install "cmake>=3.29"
  echo "::endgroup::"
fi
if command -v brew >/dev/null; then
  PATH="$(brew --prefix)/bin:$PATH"
  export PATH
fi
bash_major="$(bash -c 'echo "${BASH_VERSINFO[0]}"')"
[ "$bash_major" -ge 4 ] || die "the bash in PATH is version $bash_major; brew install bash (the build script needs >= 4)"

echo "::group::export ($MODEL_ID, $QUANT_NAME, $BACKEND)"
bash .ci/scripts/export_model_artifact.sh "$MODEL_ID" "$QUANT_NAME" "$OUTPUT_DIR" "$BACKEND"
echo "::endgroup::"

printf '%s\n' "$EXPECTED_PHRASE" > "$OUTPUT_DIR/expected_phrase.txt"
if [ "$BACKEND" = metal ]; then
  # No wheel ships the Metal delegate: build ExecuTorch with it (C++ runtime and Python package) and the runner.
  echo "::group::ExecuTorch with Metal, and the runner"
  bash backends/metal/build_runtime_macos.sh --python
  echo "::endgroup::"
  # test_model_e2e.sh transcribes AUDIO with that runner and checks the phrase (E2E_MATCH, exported above).
  SKIP_BUILD=1 RUNNER="$REPO/cmake-out/examples/parakeet-metal/parakeet_runner" \
    bash .ci/scripts/test_model_e2e.sh "$OUTPUT_DIR" "$AUDIO" "$OUTPUT_DIR/expected_phrase.txt"
else
  # The wheel's runner build links its MLX delegate; test_model_e2e.sh builds it, transcribes and checks.
  bash .ci/scripts/test_model_e2e.sh "$OUTPUT_DIR" "$AUDIO" "$OUTPUT_DIR/expected_phrase.txt"
fi
