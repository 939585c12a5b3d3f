// Files of any length (runtime/cli.py's transcribe_file): a file that fits in one window (left + chunk + right
// context, judged from its header) is transcribed in one pass; a longer one is read block by block and decoded
// with buffered left | chunk | right decoding (buffered.h), in flat memory.
#pragma once

#include <optional>
#include <string>

#include "audio.h"
#include "buffered.h"
#include "transcribe.h"

namespace parakeet {

// Buffered decoding sizes in seconds; chunk_seconds == 0 means one pass only (audio past the .pte's bound fails), no
// value means as long as the .pte's bound allows beside the two contexts (for_model).
struct LongFormOptions {
  double left_context_seconds = 0.0;
  std::optional<double> chunk_seconds = 0.0;
  double right_context_seconds = 0.0;
  // left + chunk + right; throws std::bad_optional_access while the chunk is unset (for_model sets it).
  double window_seconds() const { return left_context_seconds + chunk_seconds.value() + right_context_seconds; }
  // These sizes with an unset chunk filled for the .pte of `meta`: its bound (max_audio_samples / sample_rate
  // seconds) less both contexts, rounded down to whole encoder frames later like every size. Throws ContextError
  // when the contexts leave no encoder frame for the chunk. Mirrors longform.py's LongFormOptions.for_model.
  LongFormOptions for_model(const ModelMetadata& meta) const;
};

// Files: 4 s of left and 2 s of right context and the chunk as long as the .pte's bound allows (54 s in the default
// 60 s bound; a .pte exported for shorter windows works with the defaults), evened out over a file's length by
// transcribe_file (ContextSize::evened). Live audio: NeMo's streaming defaults
// (latency = chunk + right context = 3.2 s). The same as longform.py's FILE_CONTEXT and LIVE_CONTEXT.
constexpr LongFormOptions kFileContext{4.0, std::nullopt, 2.0};
constexpr LongFormOptions kLiveContext{10.0, 1.6, 1.6};

// The command line's sizes, with the file or live defaults where a flag is absent.
LongFormOptions resolve_context(std::optional<double> left, std::optional<double> chunk, std::optional<double> right,
                                bool live);

// The sizes in encoder frames; throws ContextError for sizes the .pte cannot take (checked against its bound).
ContextSize context_frames(Transcriber& transcriber, const LongFormOptions& options);

// One file: one pass if chunk_seconds == 0 or the file fits in one window, else buffered decoding over blocks read
// from disk, with a progress bar on stderr when it is a terminal and not `quiet`. Throws AudioError,
// PteModelError (and its ContextError / AudioRangeError).
// NaN/Inf samples and truncation are handled as `load` says (audio.h).
Transcript transcribe_file(Transcriber& transcriber, const std::string& path, const LongFormOptions& options,
                           bool quiet = false, const LoadOptions& load = {});

}  // namespace parakeet
