#!/bin/bash
# base_vs_new_rss.sh BASE.pte NEW.pte AUDIO_60S AUDIO_600S: the C++ runner's peak RSS for two exports, interleaved
# (60 s one pass twice each, 600 s buffered once each), each run after evicting the .pte from the page cache and
# reading it back (evict_page_cache.py says why); then whether the two exports' JSON transcripts are identical.
set -u
D=$(dirname "$0"); B=$1; N=$2; A60=$3; A600=$4
R=${RUNNER:-cmake-out/examples/parakeet/parakeet_runner}
ls -l "$B" "$N"
same_cache() { python3 "$D/evict_page_cache.py" "$1"; cat "$1" > /dev/null; }
for _ in 1 2; do
  same_cache "$B"; echo "== base 60 s one pass"; bash "$D/vmhwm.sh" "$B" "$A60" --chunk_seconds 0
  same_cache "$N"; echo "== new 60 s one pass"; bash "$D/vmhwm.sh" "$N" "$A60" --chunk_seconds 0
done
same_cache "$B"; echo "== base 600 s buffered"; bash "$D/vmhwm.sh" "$B" "$A600"
same_cache "$N"; echo "== new 600 s buffered"; bash "$D/vmhwm.sh" "$N" "$A600"
for a in "$A60 --chunk_seconds 0" "$A600"; do
  # shellcheck disable=SC2086
  cmp <("$R" --model_path "$B" --audio_path $a --quiet --format json 2>/dev/null) \
      <("$R" --model_path "$N" --audio_path $a --quiet --format json 2>/dev/null) && echo "JSON identical: $a"
done
