#!/bin/bash
# Quiet machine: single pass at each export's bound and 10 minutes buffered, C++ and Python (native), 2 threads.
R=/work/main/cmake-out/examples/parakeet/parakeet_runner; P60=/work/bench/kv2/fpa4w_60/model.pte; P40=/work/bench/b40/fpa4w_40/model.pte
E=/work/main/benchmarks/results/longform_full/fewer_copies/tools/evict_page_cache.py
prep() { python3 $E "$1"; cat "$1" > /dev/null; }
cpp() { $R --model_path "$@" 2>&1 >/dev/null | grep RTFx; }
py() { parakeet-transcribe --runtime native --model "$@" 2>&1 >/dev/null | grep RTFx; }
lscpu | grep "Model name"; date
for i in 1 2; do
  prep $P60; echo "== C++ 60 s bound, 60 s one pass"; cpp $P60 --audio_path /work/bench/audio_60s.wav --chunk_seconds 0
  prep $P40; echo "== C++ 40 s bound, 40 s one pass"; cpp $P40 --audio_path /work/bench/audio_40s.wav --chunk_seconds 0
  prep $P60; echo "== Python 60 s bound, 60 s one pass"; py $P60 /work/bench/audio_60s.wav --chunk-seconds 0
  prep $P40; echo "== Python 40 s bound, 40 s one pass"; py $P40 /work/bench/audio_40s.wav --chunk-seconds 0
done
prep $P40; echo "== C++ 40 s bound, 600 s buffered"; cpp $P40 --audio_path /work/bench/audio_600s.wav
prep $P60; echo "== C++ 60 s bound, 600 s buffered"; cpp $P60 --audio_path /work/bench/audio_600s.wav
prep $P40; echo "== Python 40 s bound, 600 s buffered"; py $P40 /work/bench/audio_600s.wav
prep $P60; echo "== Python 60 s bound, 600 s buffered"; py $P60 /work/bench/audio_600s.wav
date
