#include "longform.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "audio.h"
#include "audio_stream.h"

namespace parakeet {
namespace {

// A one-line text progress bar on stderr, cleared at the end (the Python runner's tqdm bar, without tqdm).
class ProgressBar {
 public:
  explicit ProgressBar(double total_seconds) : total_(total_seconds), t0_(std::chrono::steady_clock::now()) {}
  ~ProgressBar() {
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
  }
  void update(double done_seconds) {
    const double fraction = total_ > 0 ? std::min(1.0, done_seconds / total_) : 1.0;
    const int width = 30, filled = static_cast<int>(fraction * width);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double remaining = fraction > 0 ? elapsed * (1 - fraction) / fraction : 0.0;
    std::fprintf(stderr, "\r%3d%%|%s%s| %.0f/%.0f s audio [%s<%s]", static_cast<int>(fraction * 100),
                 std::string(filled, '#').c_str(), std::string(width - filled, ' ').c_str(), done_seconds, total_,
                 clock(elapsed).c_str(), clock(remaining).c_str());
    std::fflush(stderr);
  }

 private:
  static std::string clock(double seconds) {
    const long s = std::lround(seconds);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%02ld:%02ld", s / 60, s % 60);
    return buf;
  }
  double total_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

LongFormOptions LongFormOptions::for_model(const ModelMetadata& meta) const {
  if (chunk_seconds) return *this;
  // Before the sizes are subtracted: a NaN context would otherwise read as one that leaves no chunk.
  check_context_seconds("--left_context_seconds", left_context_seconds);
  check_context_seconds("--right_context_seconds", right_context_seconds);
  const double bound = static_cast<double>(meta.max_audio_samples) / static_cast<double>(meta.sample_rate);
  const double chunk = bound - left_context_seconds - right_context_seconds;
  if (!(chunk >= meta.window_stride * static_cast<double>(meta.subsampling_factor))) {
    char text[256];
    std::snprintf(text, sizeof text,
                  "this model.pte takes windows of at most %.2f s, which leaves no chunk beside %g s of left and %g s "
                  "of right context; pass smaller context sizes, or re-export with a larger --max-audio-seconds",
                  bound, left_context_seconds, right_context_seconds);
    throw ContextError(text);
  }
  LongFormOptions filled = *this;
  filled.chunk_seconds = chunk;
  return filled;
}

LongFormOptions resolve_context(std::optional<double> left, std::optional<double> chunk, std::optional<double> right,
                                bool live) {
  const LongFormOptions d = live ? kLiveContext : kFileContext;
  return {left.value_or(d.left_context_seconds), chunk ? chunk : d.chunk_seconds,
          right.value_or(d.right_context_seconds)};
}

ContextSize context_frames(Transcriber& transcriber, const LongFormOptions& unfilled) {
  const auto& meta = transcriber.metadata();
  const LongFormOptions options = unfilled.for_model(meta);
  const ContextSize context =
      ContextSize::from_seconds(options.left_context_seconds, *options.chunk_seconds, options.right_context_seconds,
                                meta.window_stride, meta.subsampling_factor);
  BufferedDecoder check(transcriber, context);  // checks the window against the .pte's bound
  return context;
}

Transcript transcribe_file(Transcriber& transcriber, const std::string& path, const LongFormOptions& options,
                           bool quiet, const LoadOptions& load) {
  const ModelMetadata& meta = transcriber.metadata();
  const int64_t rate = meta.sample_rate;
  if (options.chunk_seconds == 0.0) return transcriber.transcribe(load_audio(path, rate, load));
  const bool chunk_given = options.chunk_seconds.has_value();
  const LongFormOptions filled = options.for_model(meta);
  ContextSize context = context_frames(transcriber, filled);
  FileBlockReader reader(path, rate, load);
  if (reader.info().seconds() <= filled.window_seconds()) {
    return transcriber.transcribe(load_audio(path, rate, load));
  }
  if (!chunk_given) {
    // The default chunk is the longest the bound allows; over a file of known length, even it out so the last
    // window is not mostly re-encoded context. A chunk the user gave is kept exactly. Same as longform.py.
    const AudioInfo& info = reader.info();
    const int64_t total = (info.frames * rate + info.sample_rate - 1) / info.sample_rate;
    context = context.evened(total, meta.hop_length * meta.subsampling_factor);
  }
  std::optional<ProgressBar> bar;
  if (!quiet && isatty(STDERR_FILENO)) bar.emplace(std::round(reader.info().seconds() * 100) / 100);
  UpdateFn on_update;
  if (bar) {
    on_update = [&](const StreamUpdate&, int64_t received) {
      bar->update(static_cast<double>(received) / static_cast<double>(rate));
    };
  }
  return transcribe_buffered(
      transcriber, [&](std::vector<float>& block) { return reader.next(block); }, context,
      /*decode_partial_frame=*/true, on_update);
}

}  // namespace parakeet
