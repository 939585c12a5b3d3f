#!/bin/bash
# rss_runners.sh PTE AUDIO_ONE_PASS AUDIO_600S: peak RSS (VmHWM) of the C++ runner and of the Python runner on each
# of its runtimes (native, pybind) over the same .pte, one pass over the bound (twice each, interleaved; $SHORT
# names its length, default "60 s") and 600 s buffered (once each). Before each run the .pte is evicted from the
# page cache and read back, so that every run maps it from the same state (../fewer_copies/evict_page_cache.py says
# why). Then whether the three JSON transcripts are identical.
set -u
T=$(dirname "$0")/../fewer_copies/tools
P=$1; A60=$2; A600=$3
R=${RUNNER:-cmake-out/examples/parakeet/parakeet_runner}
ls -l "$P"
same_cache() { python3 "$T/evict_page_cache.py" "$P"; cat "$P" > /dev/null; }
peak() {  # peak LABEL CMD...: VmHWM and the largest RssAnon / RssFile seen, polled every 0.1 s (kB = KiB)
  local label=$1; shift
  "$@" > /dev/null 2>&1 &
  local pid=$! ma=0 mf=0 hwm=0 a f h
  while kill -0 $pid 2>/dev/null; do
    read -r a f h < <(awk '/RssAnon/{a=$2}/RssFile/{f=$2}/VmHWM/{h=$2}END{print a, f, h}' /proc/$pid/status 2>/dev/null)
    [ -n "$a" ] && [ "$a" -gt "$ma" ] && ma=$a; [ -n "$f" ] && [ "$f" -gt "$mf" ] && mf=$f
    [ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
    sleep 0.1
  done
  echo "$label: max RssAnon ${ma} kB, max RssFile ${mf} kB, VmHWM ${hwm} kB ($(awk "BEGIN{printf \"%.1f\", $hwm/1024}") MiB)"
}
# exec: peak polls the PID it started, which must be the runner, not a subshell around it
cpp() { exec "$R" --model_path "$P" --audio_path "$@" --quiet --format json; }
py() { local rt=$1; shift; exec parakeet-transcribe --model "$P" "$@" --quiet --format json --runtime "$rt"; }
for _ in 1 2; do
  same_cache; peak "C++ ${SHORT:-60 s} one pass" cpp "$A60" --chunk_seconds 0
  same_cache; peak "Python native ${SHORT:-60 s} one pass" py native "$A60" --chunk-seconds 0
  same_cache; peak "Python pybind ${SHORT:-60 s} one pass" py pybind "$A60" --chunk-seconds 0
done
same_cache; peak "C++ 600 s buffered" cpp "$A600"
same_cache; peak "Python native 600 s buffered" py native "$A600"
same_cache; peak "Python pybind 600 s buffered" py pybind "$A600"
for a in 60 600; do  # 60: the one-pass audio, whatever $SHORT says
  A=$A60; [ $a = 600 ] && A=$A600
  c=(); [ $a = 60 ] && c=(--chunk_seconds 0); p=(); [ $a = 60 ] && p=(--chunk-seconds 0)
  cmp <(cpp "$A" "${c[@]}" 2>/dev/null) <(py native "$A" "${p[@]}" 2>/dev/null) && echo "JSON C++ = Python native: $a s"
  cmp <(py native "$A" "${p[@]}" 2>/dev/null) <(py pybind "$A" "${p[@]}" 2>/dev/null) && echo "JSON Python native = pybind: $a s"
done
