#!/usr/bin/env bash
# The fpa_lowbit ExecuTorch kernels on their own pool (OLD_LIB: a build of the library before the change, given
# through FPA_LOWBIT_EXECUTORCH_LIB) against ExecuTorch's pool (the installed wheel), alternating, two rounds.
#   BENCH=<bench_transcribe.py --out folder with pte/ and audio_*.npy> OLD_LIB=<dir> OUT=<dir> bash run.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
for round in 1 2; do
  for v in old new; do
    if [ "$v" = old ]; then
      export FPA_LOWBIT_EXECUTORCH_LIB="$OLD_LIB/libfpa_lowbit_executorch.so"
    else
      unset FPA_LOWBIT_EXECUTORCH_LIB
    fi
    python benchmarks/bench_pte_stages.py --pte "$BENCH/pte/xnnpack-fp32" "$BENCH/pte/xnnpack-fpa4w" \
      --audio "$BENCH/audio_10s.npy" "$BENCH/audio_60s.npy" --runs 3 --threads 2 --out "$OUT/${v}_$round" \
      >"$OUT/${v}_$round.log" 2>&1
  done
done
echo "finished"
