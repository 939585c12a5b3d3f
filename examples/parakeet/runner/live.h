// Live transcription for `parakeet_runner --stream -` (raw PCM on standard input), as runtime/live.py does it for
// parakeet-transcribe: text is printed as each chunk is decided. `text` appends the final text to stdout (and,
// with `partial`, shows the draft of the right context on stderr when it is a terminal); `jsonl` prints one
// object per decoded chunk. End of input (or Ctrl-C) flushes the last partial chunk; an input that closes at once
// gives an empty transcript and exit 0. Microphone capture (--mic) is the Python runner's only.
#pragma once

#include <cstdint>
#include <string>

#include "longform.h"
#include "transcribe.h"

namespace parakeet {

struct LiveOptions {
  LongFormOptions context = kLiveContext;
  std::string format = "text";  // text or jsonl
  std::string timestamps = "all";
  bool partial = false;
  int64_t stream_rate = 16000;
  int stream_channels = 1;
};

// Transcribes raw signed 16-bit little-endian PCM from `fd` until it ends; returns the exit code (0). Throws
// AudioError for malformed PCM, ContextError for context sizes the .pte cannot take.
int run_live(Transcriber& transcriber, const LiveOptions& options, int fd = 0);

}  // namespace parakeet
