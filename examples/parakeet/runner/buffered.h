// Buffered (left | chunk | right) decoding over the .pte's methods: audio of any length, and live audio.
// A port of runtime/buffered.py (NeMo's buffered streaming inference for transducers), step for step:
//  - the context sizes are whole encoder frames; samples per encoder frame = hop x subsampling;
//  - the first window holds chunk + right context samples; each later window adds one chunk of new samples and
//    keeps at most left + chunk + right samples;
//  - each window goes through preprocessor and encoder as one utterance; the left context's encoder frames are
//    skipped and only the chunk's frames are decoded, the greedy TDT state carrying from chunk to chunk;
//  - the last window reaches the end of the audio: its chunk is everything after the previous chunk, with no right
//    context; decode_partial_frame (the default) also decodes its final partial encoder frame, so that audio which
//    fits in one window gives exactly the single-pass result.
// A window is decoded as soon as a sample beyond it has arrived, so a stream decides each chunk exactly as a whole
// file does. Memory is bounded by one window plus one block.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "errors.h"
#include "tdt_greedy.h"
#include "transcribe.h"

namespace parakeet {

// Context sizes that are negative, shorter than one encoder frame, or a window the .pte cannot take.
struct ContextError : PteModelError {
  using PteModelError::PteModelError;
};

// Throws ContextError naming the flag `name` unless `value` is a finite number of seconds >= 0.
void check_context_seconds(const char* name, double value);

// Left context, chunk and right context in encoder frames (NeMo's ContextSize).
struct ContextSize {
  int64_t left = 0;
  int64_t chunk = 0;
  int64_t right = 0;

  int64_t total() const { return left + chunk + right; }
  // Seconds rounded down to whole encoder frames as NeMo's script does:
  // int(seconds * (1 / window_stride) / subsampling_factor). Throws ContextError for a negative or non-finite
  // size, or a chunk shorter than one encoder frame.
  static ContextSize from_seconds(double left, double chunk, double right, double window_stride,
                                  int64_t subsampling_factor);
  // The same contexts with the chunk shortened so that audio of `total_samples` (model rate) splits into equal
  // chunks: n = ceil((frames - right) / chunk) windows, chunk = ceil((frames - right) / n), never longer than
  // before. Every window but the first encodes left + chunk + right frames, the last too, so a last chunk of a few
  // frames would cost a whole window. Mirrors buffered.py's ContextSize.evened.
  ContextSize evened(int64_t total_samples, int64_t frame_samples) const;
  bool operator==(const ContextSize& o) const { return left == o.left && chunk == o.chunk && right == o.right; }
};

// What one feed()/finish() call decided.
struct StreamUpdate {
  std::vector<DecodedToken> tokens;  // tokens that became final, absolute frames
  std::vector<DecodedToken> draft;   // decoded ahead over the right context (partial only); may change
  int64_t end_frame = 0;             // absolute encoder frame up to which `tokens` are final
};

// The newest samples of a stream in one float array, read back in place: a stream's window without a copy. Samples
// are appended at the tail and dropped at the head by moving an index; when the tail runs out of room the samples
// kept move to the front (one forward copy), and the array grows, to exactly what is needed, only for a block larger
// than the room left after that. Memory: the samples kept plus the largest block; amortised O(1) work per sample.
// Mirrors buffered.py's SampleBuffer.
class SampleBuffer {
 public:
  explicit SampleBuffer(int64_t capacity) : data_(static_cast<size_t>(capacity), 0.0f) {}

  int64_t start() const { return start_; }                // absolute index of the oldest sample kept
  int64_t end() const { return start_ + tail_ - head_; }  // absolute index one past the newest
  void append(const std::vector<float>& samples);
  void drop_before(int64_t sample);  // forget the samples before absolute index `sample` (no copy)
  // The samples [start, end) in place; with zero_pad_to > end - start, that many samples: zeros written after them
  // (over any kept samples after `end`). Throws std::out_of_range for a range outside the samples kept.
  const float* view(int64_t start, int64_t end, int64_t zero_pad_to = 0);
  void release() {
    std::vector<float>().swap(data_);
    head_ = tail_ = 0;
  }

 private:
  void make_room(int64_t n);

  std::vector<float> data_;
  int64_t head_ = 0;   // index in data_ of the oldest sample kept
  int64_t tail_ = 0;   // index in data_ one past the newest
  int64_t start_ = 0;  // absolute sample index of data_[head_]
};

class BufferedDecoder {
 public:
  // Throws ContextError when the window (left + chunk + right) is longer than the .pte's supported audio.
  BufferedDecoder(Transcriber& transcriber, ContextSize context, bool decode_partial_frame = true,
                  bool partial = false);

  // Adds float32 mono samples at the model's rate and decodes every window that is now complete (a sample past
  // its end has arrived). Throws std::logic_error after finish().
  StreamUpdate feed(const std::vector<float>& samples);
  // The input has ended: decodes the last window (everything after the previous chunk, no right context).
  StreamUpdate finish();

  int64_t samples_received() const { return received_; }
  int64_t num_windows() const { return num_windows_; }
  int64_t frame_samples() const { return frame_samples_; }
  int64_t window_samples() const { return window_samples_; }
  const Timings& timings() const { return timings_; }
  const ContextSize& context() const { return context_; }

 private:
  int64_t decoded_frames() const { return state_ ? state_->position.decoded_frames : 0; }
  void decode_window(int64_t end, bool last, StreamUpdate& update);

  Transcriber& transcriber_;
  ContextSize context_;
  int64_t frame_samples_;
  int64_t window_samples_;
  bool decode_partial_frame_;
  bool partial_;
  Timings timings_ = {{"preprocess", 0.0}, {"encode", 0.0}, {"decode", 0.0}};
  int64_t num_windows_ = 0;
  std::optional<TdtDecoderState> state_;
  // At most one window plus the block being fed; a window is read in place (whole hops, which the preprocessor takes
  // without a copy), where appending to a vector, copying the window out and padding it held three windows at once.
  SampleBuffer buffer_;
  int64_t received_ = 0;     // samples fed so far
  int64_t next_end_;         // end of the next non-last window
  int64_t chunk_start_ = 0;  // absolute sample where the next chunk begins
  bool finished_ = false;
};

// Fills `block` with the next float32 mono block at the model's rate; false at the end of the input.
using BlockSource = std::function<bool(std::vector<float>& block)>;
// Called after each block with the update and the samples received so far (progress, live output).
using UpdateFn = std::function<void(const StreamUpdate& update, int64_t samples_received)>;

// Transcribes the blocks of `next_block` with buffered decoding: the transcript of all tokens, with absolute
// times, summed stage timings and the window count. Throws ContextError for a window the .pte cannot take.
Transcript transcribe_buffered(Transcriber& transcriber, const BlockSource& next_block, ContextSize context,
                               bool decode_partial_frame = true, const UpdateFn& on_update = {});

// Python's str() of a float ("nan", "inf", "0.5", "70.0"), for messages that must read as the Python runner's.
std::string python_str(double v);

}  // namespace parakeet
