#!/usr/bin/env bash
# End-to-end check of an exported model: build the C++ runner, transcribe AUDIO with it, compare the transcript.
#
#   bash .ci/scripts/test_model_e2e.sh MODEL_DIR AUDIO [EXPECTED_TEXT_FILE]
#
# MODEL_DIR holds model.pte and tokenizer.model (and model.ptd / *.ptd weights, passed as --data_path when there is
# exactly one), as written by export_model_artifact.sh.
# With EXPECTED_TEXT_FILE: the runner's transcript must equal the file's text (surrounding whitespace ignored), or,
# with E2E_MATCH=contains, contain it after lower-casing and dropping punctuation on both sides.
# Without it: the Python runner (parakeet-transcribe) runs on the same files and both runners' outputs must be
# identical, as plain text and as JSON with all timestamps.
# Exits non-zero on any mismatch, on an empty transcript, or when a runner fails.
# Environment: PYTHON (default python), SKIP_BUILD=1 (reuse an already built runner), RUNNER (runner binary,
# default cmake-out/examples/parakeet/parakeet_runner), E2E_MATCH (exact | contains, default exact).
# Written to be bash 3.2 compatible (macOS /bin/bash).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PYTHON="${PYTHON:-python}"
RUNNER="${RUNNER:-$REPO/cmake-out/examples/parakeet/parakeet_runner}"
E2E_MATCH="${E2E_MATCH:-exact}"

die() { echo "test_model_e2e: error: $*" >&2; exit 1; }

if [ "$#" -lt 2 ] || [ "$#" -gt 3 ]; then
  echo "usage: $0 MODEL_DIR AUDIO [EXPECTED_TEXT_FILE]" >&2
  exit 2
fi
MODEL_DIR="$1"
AUDIO="$2"
EXPECTED="${3:-}"
case "$E2E_MATCH" in exact | contains) ;; *) die "E2E_MATCH must be exact or contains, got '$E2E_MATCH'" ;; esac
[ -s "$MODEL_DIR/model.pte" ] || die "$MODEL_DIR/model.pte is missing or empty"
[ -s "$MODEL_DIR/tokenizer.model" ] || die "$MODEL_DIR/tokenizer.model is missing or empty"
[ -f "$AUDIO" ] || die "$AUDIO: no such audio file"
if [ -n "$EXPECTED" ]; then [ -f "$EXPECTED" ] || die "$EXPECTED: no such expected-text file"; fi

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  bash "$REPO/.ci/scripts/build_parakeet_runner.sh" || die "building the C++ runner failed"
fi
[ -x "$RUNNER" ] || die "$RUNNER not found or not executable (build it with .ci/scripts/build_parakeet_runner.sh)"

runner_args=(--model_path "$MODEL_DIR/model.pte" --tokenizer_path "$MODEL_DIR/tokenizer.model" --audio_path "$AUDIO")
ptd_count=0
ptd=""
for f in "$MODEL_DIR"/*.ptd; do
  if [ -f "$f" ]; then ptd="$f"; ptd_count=$((ptd_count + 1)); fi
done
if [ "$ptd_count" -eq 1 ]; then
  runner_args+=(--data_path "$ptd")
elif [ "$ptd_count" -gt 1 ]; then
  die "$MODEL_DIR holds $ptd_count .ptd files; the runner takes one --data_path"
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

run_cpp() {  # run_cpp OUT_FILE [runner args...]
  local out="$1"
  shift
  if ! "$RUNNER" "${runner_args[@]}" "$@" > "$out" 2> "$WORK/cpp.err"; then
    cat "$WORK/cpp.err" >&2
    die "the C++ runner failed on $AUDIO"
  fi
}

run_cpp "$WORK/cpp.txt" --format text
cat "$WORK/cpp.err" >&2   # stage timings and RTFx
TRANSCRIPT="$(cat "$WORK/cpp.txt")"
echo "C++ runner transcript: $TRANSCRIPT"
[ -n "$(printf '%s' "$TRANSCRIPT" | tr -d '[:space:]')" ] || die "the C++ runner printed an empty transcript"

normalize() {  # lower case, punctuation dropped, whitespace squeezed and trimmed
  printf '%s' "$1" | tr '[:upper:]' '[:lower:]' | tr -d '[:punct:]' | tr -s '[:space:]' ' ' | sed -e 's/^ //' -e 's/ $//'
}
trim() { printf '%s' "$1" | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//'; }

if [ -n "$EXPECTED" ]; then
  WANT="$(cat "$EXPECTED")"
  if [ "$E2E_MATCH" = exact ]; then
    if [ "$(trim "$TRANSCRIPT")" != "$(trim "$WANT")" ]; then
      echo "expected: $(trim "$WANT")" >&2
      echo "got:      $(trim "$TRANSCRIPT")" >&2
      die "transcript differs from $EXPECTED"
    fi
  else
    case "$(normalize "$TRANSCRIPT")" in
      *"$(normalize "$WANT")"*) ;;
      *)
        echo "expected to contain: $(normalize "$WANT")" >&2
        echo "got:                 $(normalize "$TRANSCRIPT")" >&2
        die "transcript does not contain the text of $EXPECTED"
        ;;
    esac
  fi
  echo "test_model_e2e: OK (transcript matches $EXPECTED, mode $E2E_MATCH)"
  exit 0
fi

# No expected text: the Python runner on the same files must print exactly the same.
py_run() {  # py_run OUT_FILE FORMAT
  if ! "$PYTHON" -m parakeet_executorch.runtime.cli --model "$MODEL_DIR/model.pte" \
      --tokenizer "$MODEL_DIR/tokenizer.model" --format "$2" "$AUDIO" > "$1" 2> "$WORK/py.err"; then
    cat "$WORK/py.err" >&2
    die "the Python runner (parakeet-transcribe) failed on $AUDIO"
  fi
}
py_run "$WORK/py.txt" txt
if ! cmp -s "$WORK/cpp.txt" "$WORK/py.txt"; then
  diff "$WORK/py.txt" "$WORK/cpp.txt" >&2 || true
  die "text transcripts differ (< Python runner, > C++ runner)"
fi
run_cpp "$WORK/cpp.json" --format json --timestamps all
py_run "$WORK/py.json" json
if ! cmp -s "$WORK/cpp.json" "$WORK/py.json"; then
  diff "$WORK/py.json" "$WORK/cpp.json" >&2 || true
  die "JSON outputs (tokens, timestamps) differ (< Python runner, > C++ runner)"
fi
echo "test_model_e2e: OK (C++ and Python runners agree on text and JSON with timestamps)"
