#!/bin/bash
# vmhwm.sh PTE AUDIO [runner args...]: run the C++ runner and print its largest RssAnon, RssFile and its VmHWM
# (/proc/PID/status, polled every 0.1 s; the kernel's "kB" are KiB). RUNNER overrides the runner's path.
R=${RUNNER:-cmake-out/examples/parakeet/parakeet_runner}
"$R" --model_path "$1" --audio_path "$2" "${@:3}" --quiet > /dev/null 2>&1 &
pid=$!; ma=0; mf=0; hwm=0
while kill -0 $pid 2>/dev/null; do
  read -r a f h < <(awk '/RssAnon/{a=$2}/RssFile/{f=$2}/VmHWM/{h=$2}END{print a, f, h}' /proc/$pid/status 2>/dev/null)
  [ -n "$a" ] && [ "$a" -gt "$ma" ] && ma=$a; [ -n "$f" ] && [ "$f" -gt "$mf" ] && mf=$f; [ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
  sleep 0.1
done
echo "max RssAnon ${ma} kB, max RssFile ${mf} kB, VmHWM ${hwm} kB"
