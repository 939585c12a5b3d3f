#include "audio_stream.h"

#include <sndfile.h>
#include <soxr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "audio.h"
#include "errors.h"

namespace parakeet {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

// The containers a user is likely to pipe in by mistake, by their first bytes (audio_stream.py's table).
void refuse_container(const std::vector<uint8_t>& head) {
  static const std::pair<const char*, const char*> kMagic[] = {{"RIFF", "WAV"}, {"RF64", "WAV"}, {"fLaC", "FLAC"},
                                                               {"OggS", "OGG"}, {"ID3", "MP3"},  {"FORM", "AIFF"}};
  for (const auto& [magic, name] : kMagic) {
    const size_t n = std::strlen(magic);
    if (head.size() >= n && std::memcmp(head.data(), magic, n) == 0) {
      throw AudioError(std::string("standard input holds a ") + name +
                       " file, not raw PCM: pass the file with --audio_path, or send raw 16-bit PCM (arecord -t raw "
                       "-f S16_LE, sox ... -t raw -e signed -b 16 -)");
    }
  }
}

}  // namespace

AudioInfo audio_info(const std::string& path) {
  SF_INFO info;
  std::string log;
  open_sndfile(path, info, log);
  return {static_cast<int64_t>(info.frames), static_cast<int64_t>(info.samplerate), info.channels};
}

// ---- StreamResampler ---------------------------------------------------------------------------------------------

StreamResampler::StreamResampler(int64_t from_rate, int64_t to_rate) {
  if (from_rate <= 0 || to_rate <= 0) {
    throw AudioError("sample rates must be positive, got " + std::to_string(from_rate) + " Hz -> " +
                     std::to_string(to_rate) + " Hz");
  }
  if (from_rate == to_rate) return;
  in_rate_ = static_cast<double>(from_rate);
  out_rate_ = static_cast<double>(to_rate);
  oi_rate_ = out_rate_ / in_rate_;
  soxr_error_t err = nullptr;
  const soxr_io_spec_t io_spec = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t quality_spec = soxr_quality_spec(SOXR_HQ, 0);
  soxr_ = soxr_create(in_rate_, out_rate_, 1, &err, &io_spec, &quality_spec, nullptr);
  if (err || !soxr_) {
    soxr_delete(soxr_);
    soxr_ = nullptr;
    throw AudioError(std::string("cannot create the libsoxr resampler: ") + (err ? err : "?"));
  }
}

StreamResampler::~StreamResampler() {
  if (soxr_) soxr_delete(soxr_);
}

std::vector<float> StreamResampler::operator()(std::vector<float> mono, bool last) {
  if (!soxr_) return mono;
  if (ended_) throw AudioError("libsoxr: input after the last input");
  // Output size and input pieces exactly as python-soxr's CSoxr::process: soxr's output depends slightly on how
  // its input is split, and matching it keeps the samples equal to the Python runner's.
  const size_t ilen = mono.size();
  const size_t olen = static_cast<size_t>(soxr_delay(soxr_) + static_cast<double>(ilen) * oi_rate_ + 1);
  const size_t chunk_len = std::max<size_t>(1, static_cast<size_t>(48000 * in_rate_ / out_rate_));
  std::vector<float> out(olen, 0.0f);
  soxr_error_t err = nullptr;
  size_t out_pos = 0, odone = 0;
  for (size_t idx = 0; idx < ilen; idx += chunk_len) {
    err = soxr_process(soxr_, mono.data() + idx, std::min(chunk_len, ilen - idx), nullptr, out.data() + out_pos,
                       olen - out_pos, &odone);
    out_pos += odone;
  }
  if (last) {
    ended_ = true;
    err = soxr_process(soxr_, nullptr, 0, nullptr, out.data() + out_pos, olen - out_pos, &odone);
    out_pos += odone;
  }
  if (err) throw AudioError(std::string("libsoxr failed to resample: ") + err);
  out.resize(out_pos);
  return out;
}

// ---- FileBlockReader ---------------------------------------------------------------------------------------------

FileBlockReader::FileBlockReader(const std::string& path, int64_t sample_rate, const LoadOptions& options,
                                 int64_t block_frames)
    : path_(path), block_frames_(block_frames), options_(options), file_(nullptr, &sf_close) {
  SF_INFO info;
  file_ = open_sndfile(path, info, log_);
  info_ = {static_cast<int64_t>(info.frames), static_cast<int64_t>(info.samplerate), info.channels};
  resample_ = std::make_unique<StreamResampler>(info_.sample_rate, sample_rate);
}

bool FileBlockReader::next(std::vector<float>& block) {
  while (!done_) {
    std::vector<float> interleaved(static_cast<size_t>(block_frames_) * info_.channels);
    // libsndfile scales integer PCM to [-1, 1) itself, as soundfile's read(dtype="float32") does.
    const sf_count_t got = sf_readf_float(file_.get(), interleaved.data(), block_frames_);
    if (got < 0 || (got < block_frames_ && sf_error(file_.get()) != SF_ERR_NO_ERROR)) {
      throw AudioError("cannot decode audio file " + path_ + ": " + sf_strerror(file_.get()));
    }
    interleaved.resize(static_cast<size_t>(got) * info_.channels);
    // Checked per block, before mixing, with the block's offset: the error names the file's own time.
    finite_or_zeroed(interleaved.data(), static_cast<size_t>(got), info_.channels, path_, frames_read_,
                     info_.sample_rate, options_);
    frames_read_ += got;
    const bool last = got < block_frames_;
    block = (*resample_)(to_mono(interleaved, info_.channels), last);
    if (last) {
      done_ = true;
      file_.reset();
      warn_if_truncated(path_, log_, frames_read_, info_.sample_rate, options_.warn);
    }
    if (!block.empty()) return true;
  }
  return false;
}

// ---- PcmBlockReader ----------------------------------------------------------------------------------------------

PcmBlockReader::PcmBlockReader(int fd, int64_t stream_rate, int channels, int64_t sample_rate, int64_t block_frames)
    : fd_(fd), channels_(channels), block_frames_(block_frames) {
  if (stream_rate <= 0 || channels <= 0) {
    throw AudioError("--stream_rate and --stream_channels must be positive, got " + std::to_string(stream_rate) +
                     " Hz, " + std::to_string(channels));
  }
  resample_ = std::make_unique<StreamResampler>(stream_rate, sample_rate);
}

void PcmBlockReader::interrupt() { g_interrupted = 1; }
bool PcmBlockReader::interrupted() { return g_interrupted != 0; }

bool PcmBlockReader::next(std::vector<float>& block) {
  const size_t frame_bytes = 2 * static_cast<size_t>(channels_);
  while (true) {
    if (ended_) {
      // After the flushed tail has been handed out, as audio_stream.py raises after its last yield.
      if (!pending_.empty()) {
        throw AudioError("the PCM stream ended inside a frame (" + std::to_string(pending_.size()) +
                         " stray byte(s)); it must be 16-bit little-endian with " + std::to_string(channels_) +
                         " channel(s): check --stream_channels");
      }
      return false;
    }
    if (interrupted()) return false;
    // One read takes what the pipe holds now (as Python's read1) rather than waiting for a full block.
    std::vector<uint8_t> chunk(static_cast<size_t>(block_frames_) * frame_bytes);
    ssize_t got;
    do {
      got = ::read(fd_, chunk.data(), chunk.size());
    } while (got < 0 && errno == EINTR && !interrupted());
    if (got < 0) {
      if (interrupted()) return false;
      throw AudioError(std::string("cannot read standard input: ") + std::strerror(errno));
    }
    chunk.resize(static_cast<size_t>(got));
    if (first_ && !chunk.empty()) {
      refuse_container(chunk);
      first_ = false;
    }
    pending_.insert(pending_.end(), chunk.begin(), chunk.end());
    const size_t usable = pending_.size() - pending_.size() % frame_bytes;
    const bool last = chunk.empty();
    if (usable || last) {
      std::vector<float> interleaved(usable / 2);
      for (size_t i = 0; i < interleaved.size(); ++i) {
        const auto v = static_cast<int16_t>(static_cast<uint16_t>(pending_[2 * i] | (pending_[2 * i + 1] << 8)));
        interleaved[i] = static_cast<float>(v) / 32768.0f;
      }
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(usable));
      if (last) ended_ = true;
      block = (*resample_)(to_mono(interleaved, channels_), last);
      if (!block.empty()) return true;
    }
  }
}

}  // namespace parakeet
