// Audio read block by block, for recordings of any length and for live input, with flat memory: a port of
// audio_stream.py. Files are decoded with libsndfile kBlockFrames frames at a time, averaged to mono per block and
// resampled with libsoxr's streaming resampler, fed exactly as python-soxr's ResampleStream.resample_chunk feeds
// it, so both runners see the same samples. Raw 16-bit PCM from a pipe (arecord -f S16_LE ...) goes through the
// same mixing and resampling.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "audio.h"

struct soxr;

namespace parakeet {

constexpr int64_t kBlockFrames = 65536;    // source frames per file block: ~4 s at 16 kHz
constexpr int64_t kPcmBlockFrames = 1600;  // frames per stdin read: 0.1 s at 16 kHz, so live audio moves on quickly

// What a file's header says: frames per channel, sample rate (Hz), channels.
struct AudioInfo {
  int64_t frames = 0;
  int64_t sample_rate = 0;
  int channels = 0;
  double seconds() const { return sample_rate > 0 ? static_cast<double>(frames) / sample_rate : 0.0; }
};

// Reads a file's header with libsndfile. Throws AudioError for a missing or undecodable file.
AudioInfo audio_info(const std::string& path);

// libsoxr's streaming resampler (HQ, float32, one channel) from `from_rate` to `to_rate` Hz, or nothing when the
// rates match. Each call sizes its output and splits its input as python-soxr 1.0.0's resample_chunk does; `last`
// flushes the filter, after which no input is taken.
class StreamResampler {
 public:
  StreamResampler(int64_t from_rate, int64_t to_rate);  // throws AudioError for a rate <= 0
  ~StreamResampler();
  StreamResampler(const StreamResampler&) = delete;
  StreamResampler& operator=(const StreamResampler&) = delete;

  std::vector<float> operator()(std::vector<float> mono, bool last);

 private:
  soxr* soxr_ = nullptr;
  double in_rate_ = 0, out_rate_ = 0, oi_rate_ = 0;
  bool ended_ = false;
};

// A file's audio as float32 mono blocks at `sample_rate`, read `block_frames` source frames at a time
// (read_blocks in audio_stream.py). Throws AudioError: missing or undecodable file, or a failure mid-way.
class FileBlockReader {
 public:
  // NaN/Inf samples are refused (or zeroed, as options say) block by block; a truncated file warns at its end.
  FileBlockReader(const std::string& path, int64_t sample_rate, const LoadOptions& options = {},
                  int64_t block_frames = kBlockFrames);
  const AudioInfo& info() const { return info_; }
  // The next non-empty block; false at the end.
  bool next(std::vector<float>& block);

 private:
  std::string path_;
  AudioInfo info_;
  int64_t block_frames_;
  LoadOptions options_;
  SndFile file_;
  std::string log_;
  int64_t frames_read_ = 0;
  std::unique_ptr<StreamResampler> resample_;
  bool done_ = false;
};

// Raw signed 16-bit little-endian interleaved PCM from a file descriptor (standard input) as float32 mono at
// `sample_rate` (read_pcm_blocks in audio_stream.py): each read takes what the pipe holds, up to `block_frames`
// frames, so live audio is decoded as it arrives; samples are scaled by 1/32768 as libsndfile scales PCM16.
// Throws AudioError: a container file (WAV, FLAC, ...) instead of raw PCM, a stream ending inside a frame, a read
// error, or a rate or channel count <= 0.
class PcmBlockReader {
 public:
  PcmBlockReader(int fd, int64_t stream_rate, int channels, int64_t sample_rate,
                 int64_t block_frames = kPcmBlockFrames);
  // The next non-empty block; false at the end of the stream, or once interrupted() is set.
  bool next(std::vector<float>& block);
  // Stop at the next read, without flushing (what Ctrl-C does to the Python runner); async-signal-safe.
  static void interrupt();
  static bool interrupted();

 private:
  int fd_;
  int channels_;
  int64_t block_frames_;
  std::unique_ptr<StreamResampler> resample_;
  std::vector<uint8_t> pending_;
  bool first_ = true;
  bool ended_ = false;
};

}  // namespace parakeet
