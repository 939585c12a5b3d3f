#!/usr/bin/env bash
# Train the v2 demo model on a lent GPU machine whose commands may run 10 minutes at most.
#
#   bash tools/train_demo_on_gpu.sh stage   # install and unpack the base synthesizers only (a call of its own
#                                           # when the extra synthesizers' packages need a second transfer)
#   bash tools/train_demo_on_gpu.sh start   # install, unpack the synthesizers, start training detached, then wait
#   bash tools/train_demo_on_gpu.sh wait    # wait for it (again and again, each call within the previous one's
#                                           # idle window), and collect the results into $OUT
#
# Exit status: 0 when training finished and $OUT holds the model; 3 while it is still running (call "wait"
# again); 1 when it failed (the log is in $OUT). The run lives in $RUN (default /tmp/demo-train), which lasts as
# long as the machine is held. Each call leaves in $OUT the log, the training log (.train.json) and the newest
# model (final, or else the latest checkpoint) split into 15 MB parts, since one returned file may be 16 MiB at
# most: join them with `cat parakeet-tdt-demo.nemo.part-* > parakeet-tdt-demo.nemo`.
#
# Inputs, in the repository root: .whl/ (NeMo and the Python packages the machine lacks: on 2026-12-02 the 45
# wheels of nemo_toolkit 3.0.0's asr needs missing from the image, lightning 2.4.0 among them, since the image's
# lightning breaks nv-one-logger; about 19 MB; tools/gpu_train_wheels.txt lists them) and build/tts-debs/
# (made here by `python -m parakeet_executorch.training.tts_bundle pack build/tts-debs`); for
# --extra-voice-fraction also the extra synthesizers' packages (`... pack --extra build/tts-debs-extra`, ~62 MB),
# split into build/tts-debs-*/ folders that each fit one transfer beside the working tree (one call may carry
# 64 MiB in all): every call unpacks the build/tts-debs-*/ folders it finds, so "stage" calls carry the parts and
# the last part comes with "start". Training options can be overridden with TRAIN_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${RUN:-/tmp/demo-train}
WAIT_S=${WAIT_S:-540}  # seconds since this call began (the setup counts), under the 600 s limit
OUT=${OUT:-$RUN/out}
TRAIN_ARGS=${TRAIN_ARGS:---hours 40 --long-fraction 0.3 --steps 200000 --max-minutes 15 --batch-size 256 \
--batch-seconds 600 --lr 2e-3 --warmup 1000 --eval-every 500 --checkpoint-every-minutes 4 --seed 0}
NAME=parakeet-tdt-demo.nemo
export PYTHONPATH="$RUN/site:$PWD/src" PYTHONUNBUFFERED=1 PARAKEET_TTS_PREFIX="$RUN/tts"
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True

unpack_extra() {
  # Whatever build/tts-debs-*/ folders this call carried (the extra synthesizers come in parts).
  local d
  for d in build/tts-debs-*/; do
    [ -d "$d" ] && python3 -m parakeet_executorch.training.tts_bundle unpack "$d" "$RUN/tts"
  done
  return 0
}

stage() {
  mkdir -p "$RUN"
  if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$RUN/site" .whl/*.whl
  fi
  # The GPU image's numba-cuda still names numpy.row_stack, which its numpy 2.5 no longer has; NeMo's numba TDT
  # loss then fails at its first step. Give it the alias (the same function as vstack) in this run's site only.
  mkdir -p "$RUN/site"
  printf 'import numpy\nif not hasattr(numpy, "row_stack"):\n    numpy.row_stack = numpy.vstack\n' \
    >"$RUN/site/sitecustomize.py"
  python3 -m parakeet_executorch.training.tts_bundle unpack build/tts-debs "$RUN/tts"
  touch "$RUN/staged"
  python3 -c "import torch, nemo.collections.asr, soundfile, soxr, jiwer; print('torch', torch.__version__, \
'cuda', torch.cuda.is_available() and torch.cuda.get_device_name(0))"
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv || true
}

start() {
  if [ -e "$RUN/pid" ]; then
    echo "a run was already started in $RUN; use: $0 wait" >&2
    exit 1
  fi
  [ -e "$RUN/staged" ] || stage
  unpack_extra
  # shellcheck disable=SC2086  # TRAIN_ARGS is a list of options
  setsid nohup python3 -m parakeet_executorch.training.train --out "$RUN/$NAME" --device "${DEVICE:-cuda}" --workers "$(nproc)" \
    $TRAIN_ARGS >"$RUN/train.log" 2>&1 </dev/null &
  echo $! >"$RUN/pid"
  echo "started training (pid $(cat "$RUN/pid")); log: $RUN/train.log"
}

collect() {
  mkdir -p "$OUT"
  cp "$RUN/train.log" "$OUT/train.log"
  [ -f "$RUN/$NAME.train.json" ] && cp "$RUN/$NAME.train.json" "$OUT/"
  local model="$RUN/$NAME"
  [ -f "$model" ] || model="$RUN/${NAME%.nemo}.checkpoint.nemo"
  if [ -f "$model" ]; then
    split -b 15000000 -d "$model" "$OUT/$(basename "$model").part-"
    sha256sum "$model" | tee "$OUT/$(basename "$model").sha256"
  fi
  ls -l "$OUT"
}

wait_for_it() {
  local pid shown=0
  pid=$(cat "$RUN/pid")
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$WAIT_S" ]; do
    sleep 10
    local n
    n=$(wc -l <"$RUN/train.log")
    if [ "$n" -gt "$shown" ]; then
      sed -n "$((shown + 1)),${n}p" "$RUN/train.log" | grep -v "NeMo [IW]" || true
    fi
    shown=$n
  done
  collect
  if kill -0 "$pid" 2>/dev/null; then
    echo "still training; call: $0 wait"
    return 3
  fi
  tail -5 "$RUN/train.log"
  if [ -f "$RUN/$NAME" ] && grep -q "^wrote " "$RUN/train.log"; then
    echo "done"
    return 0
  fi
  echo "training failed; see train.log" >&2
  return 1
}

case "${1:-}" in
  stage) [ -e "$RUN/staged" ] || stage; unpack_extra ;;
  start) start; wait_for_it ;;
  wait) wait_for_it ;;
  *) echo "usage: $0 stage|start|wait" >&2; exit 2 ;;
esac
