#include "buffered.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "formats.h"

namespace parakeet {
namespace {

// Python's int() of a non-negative frame count. Counts past 2^40 frames (about 35,000 years of audio) are clamped
// so that the sample arithmetic cannot overflow; the window check rejects them all the same.
int64_t whole_frames(double frames) {
  constexpr double kMax = static_cast<double>(int64_t{1} << 40);
  return static_cast<int64_t>(std::min(frames, kMax));
}

void add_timing(Timings& timings, const Timings& stage) {
  for (const auto& [name, seconds] : stage) {
    auto it = std::find_if(timings.begin(), timings.end(), [&](const auto& p) { return p.first == name; });
    if (it == timings.end()) {
      timings.emplace_back(name, seconds);
    } else {
      it->second += seconds;
    }
  }
}

}  // namespace

std::string python_str(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return python_float(v);
}

void check_context_seconds(const char* name, double value) {
  if (!std::isfinite(value) || value < 0) {
    throw ContextError(std::string(name) + " must be a non-negative number of seconds, got " + python_str(value));
  }
}

ContextSize ContextSize::from_seconds(double left, double chunk, double right, double window_stride,
                                      int64_t subsampling_factor) {
  const std::pair<const char*, double> sizes[] = {
      {"--left_context_seconds", left}, {"--chunk_seconds", chunk}, {"--right_context_seconds", right}};
  for (const auto& [name, value] : sizes) check_context_seconds(name, value);
  // Same operations in the same order as the Python runner (and NeMo's script), so the rounding agrees.
  const double features_per_second = 1.0 / window_stride;
  const auto frames = [&](double s) {
    return whole_frames(s * features_per_second / static_cast<double>(subsampling_factor));
  };
  ContextSize out{frames(left), frames(chunk), frames(right)};
  const double frame_seconds = window_stride * static_cast<double>(subsampling_factor);
  if (out.chunk < 1) {
    throw ContextError("--chunk_seconds " + python_str(chunk) + " is shorter than one encoder frame (" +
                       format_seconds(frame_seconds) + " s); pass at least " + format_seconds(frame_seconds));
  }
  return out;
}

ContextSize ContextSize::evened(int64_t total_samples, int64_t frame_samples) const {
  const int64_t frames = (total_samples + frame_samples - 1) / frame_samples;
  if (frames <= right + chunk) return *this;  // one window: nothing to even out
  const int64_t windows = (frames - right + chunk - 1) / chunk;
  return ContextSize{left, std::min(chunk, (frames - right + windows - 1) / windows), right};
}

BufferedDecoder::BufferedDecoder(Transcriber& transcriber, ContextSize context, bool decode_partial_frame, bool partial)
    : transcriber_(transcriber),
      context_(context),
      frame_samples_(transcriber.metadata().hop_length * transcriber.metadata().subsampling_factor),
      window_samples_(context.total() * frame_samples_),
      decode_partial_frame_(decode_partial_frame),
      partial_(partial),
      buffer_(window_samples_ + transcriber.metadata().hop_length),
      next_end_((context.chunk + context.right) * frame_samples_) {
  const auto& meta = transcriber.metadata();
  if (window_samples_ > meta.max_audio_samples) {
    const double rate = static_cast<double>(meta.sample_rate);
    throw ContextError("a window of " + format_seconds(static_cast<double>(window_samples_) / rate) +
                       " s (left + chunk + right context) is longer than this model.pte's " +
                       format_seconds(static_cast<double>(meta.max_audio_samples) / rate) +
                       " s; use smaller context sizes or re-export with a larger --max-audio-seconds");
  }
}

StreamUpdate BufferedDecoder::feed(const std::vector<float>& samples) {
  if (finished_) throw std::logic_error("feed() after finish(): start a new BufferedDecoder");
  // Every window from here on ends at or after the samples received so far, so none starts before the last
  // window's worth of them: older samples are never read again.
  buffer_.drop_before(received_ - window_samples_);
  buffer_.append(samples);
  received_ += static_cast<int64_t>(samples.size());
  StreamUpdate update;
  update.end_frame = decoded_frames();
  while (received_ > next_end_) {
    decode_window(next_end_, /*last=*/false, update);
    next_end_ += context_.chunk * frame_samples_;
  }
  return update;
}

StreamUpdate BufferedDecoder::finish() {
  StreamUpdate update;
  update.end_frame = decoded_frames();
  if (finished_) return update;
  finished_ = true;
  if (received_ > chunk_start_) decode_window(received_, /*last=*/true, update);
  buffer_.release();
  return update;
}

void SampleBuffer::append(const std::vector<float>& samples) {
  const auto n = static_cast<int64_t>(samples.size());
  make_room(n);
  std::copy(samples.begin(), samples.end(), data_.begin() + tail_);
  tail_ += n;
}

void SampleBuffer::drop_before(int64_t sample) {
  const int64_t k = std::min(std::max<int64_t>(0, sample - start_), tail_ - head_);
  head_ += k;
  start_ += k;
}

const float* SampleBuffer::view(int64_t start, int64_t end, int64_t zero_pad_to) {
  if (start < start_ || start > end || end > this->end()) {
    throw std::out_of_range("samples [" + std::to_string(start) + ", " + std::to_string(end) + ") are not all kept");
  }
  const int64_t n = end - start;
  if (zero_pad_to > n) {
    make_room(zero_pad_to - (this->end() - start));
    const int64_t a = head_ + start - start_;
    std::fill(data_.begin() + a + n, data_.begin() + a + zero_pad_to, 0.0f);
  }
  return data_.data() + head_ + (start - start_);
}

void SampleBuffer::make_room(int64_t n) {
  if (tail_ + n <= static_cast<int64_t>(data_.size())) return;
  const int64_t kept = tail_ - head_;
  if (kept + n <= static_cast<int64_t>(data_.size())) {
    // Forward copy to the front: the destination starts before the source, so the overlap is allowed.
    std::copy(data_.begin() + head_, data_.begin() + tail_, data_.begin());
  } else {
    std::vector<float> grown(static_cast<size_t>(kept + n), 0.0f);  // exactly: std::vector's growth would double
    std::copy(data_.begin() + head_, data_.begin() + tail_, grown.begin());
    data_.swap(grown);
  }
  head_ = 0;
  tail_ = kept;
}

void BufferedDecoder::decode_window(int64_t end, bool last, StreamUpdate& update) {
  const int64_t fs = frame_samples_;
  const int64_t start = std::max<int64_t>(0, end - window_samples_);
  // The last window is zero-padded to whole hops in place: no sample after `end` is read again.
  const int64_t size = last ? transcriber_.metadata().padded_samples(end - start) : end - start;
  const float* window = buffer_.view(start, end, last ? size : 0);
  const int64_t chunk_start = chunk_start_;
  const int64_t chunk_end = last ? end : end - context_.right * fs;
  const int64_t left_frames = (chunk_start - start) / fs;  // chunk_start >= start: no rounding direction to mind
  Timings stage;
  const Encoded encoded = transcriber_.encode(window, size, end - start, stage);
  add_timing(timings_, stage);
  const auto t0 = std::chrono::steady_clock::now();
  if (!state_) state_ = transcriber_.initial_decoder_state();
  const int64_t available = std::max<int64_t>(0, encoded.valid_frames - left_frames);
  const int64_t count = last && decode_partial_frame_ ? available : std::min((chunk_end - chunk_start) / fs, available);
  auto [tokens, next] = transcriber_.decode_frames(encoded, left_frames, count, *state_);
  state_ = std::move(next);
  update.tokens.insert(update.tokens.end(), tokens.begin(), tokens.end());
  update.end_frame = state_->position.decoded_frames;
  if (partial_ && !last) {
    const int64_t ahead = std::max<int64_t>(0, std::min(encoded.valid_frames - left_frames - count, context_.right));
    update.draft = transcriber_.decode_frames(encoded, left_frames + count, ahead, *state_).first;
  } else if (last) {
    update.draft.clear();
  }
  add_timing(timings_, {{"decode", seconds_since(t0)}});
  ++num_windows_;
  chunk_start_ = chunk_end;
}

Transcript transcribe_buffered(Transcriber& transcriber, const BlockSource& next_block, ContextSize context,
                               bool decode_partial_frame, const UpdateFn& on_update) {
  BufferedDecoder decoder(transcriber, context, decode_partial_frame);
  std::vector<DecodedToken> tokens;
  std::vector<float> block;
  while (next_block(block)) {
    const StreamUpdate update = decoder.feed(block);
    tokens.insert(tokens.end(), update.tokens.begin(), update.tokens.end());
    if (on_update) on_update(update, decoder.samples_received());
  }
  const StreamUpdate update = decoder.finish();
  tokens.insert(tokens.end(), update.tokens.begin(), update.tokens.end());
  if (on_update) on_update(update, decoder.samples_received());
  const double rate = static_cast<double>(transcriber.metadata().sample_rate);
  Transcript out =
      transcriber.transcript(tokens, static_cast<double>(decoder.samples_received()) / rate, decoder.timings());
  out.windows = decoder.num_windows();
  return out;
}

}  // namespace parakeet
