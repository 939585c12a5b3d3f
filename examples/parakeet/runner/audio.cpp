#include "audio.h"

#include <sndfile.h>
#include <soxr.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "errors.h"

namespace parakeet {

std::vector<float> to_mono(const std::vector<float>& interleaved, int channels) {
  if (channels <= 1) return interleaved;
  const size_t frames = interleaved.size() / channels;
  std::vector<float> out(frames);
  for (size_t f = 0; f < frames; ++f) {
    double sum = 0.0;
    for (int c = 0; c < channels; ++c) sum += interleaved[f * channels + c];
    out[f] = static_cast<float>(sum / channels);
  }
  return out;
}

std::vector<float> resample(const std::vector<float>& samples, int64_t from_rate, int64_t to_rate) {
  if (from_rate <= 0 || to_rate <= 0) {
    throw AudioError("sample rates must be positive, got " + std::to_string(from_rate) + " Hz -> " +
                     std::to_string(to_rate) + " Hz");
  }
  if (from_rate == to_rate || samples.empty()) return samples;
  const double in_rate = static_cast<double>(from_rate), out_rate = static_cast<double>(to_rate);
  // Buffer length, chunk length and flush as python-soxr's csoxr_split_ch: soxr's output depends slightly on how
  // the input is chunked, and matching it keeps the waveform (and so the tokens) equal to the Python runner's.
  const size_t ilen = samples.size();
  const size_t olen = static_cast<size_t>(ilen * out_rate / in_rate + 1);
  const size_t div_len = static_cast<size_t>(std::max(1000., 48000 * in_rate / out_rate));
  soxr_error_t err = nullptr;
  const soxr_io_spec_t io_spec = soxr_io_spec(SOXR_FLOAT32_S, SOXR_FLOAT32_S);
  const soxr_quality_spec_t quality_spec = soxr_quality_spec(SOXR_HQ, 0);
  std::unique_ptr<soxr, decltype(&soxr_delete)> resampler(
      soxr_create(in_rate, out_rate, 1, &err, &io_spec, &quality_spec, nullptr), &soxr_delete);
  if (err || !resampler) throw AudioError(std::string("cannot create the libsoxr resampler: ") + (err ? err : "?"));
  std::vector<float> out(olen, 0.0f);
  size_t out_pos = 0, odone = 0;
  for (size_t idx = 0; idx < ilen && !err; idx += div_len) {
    const float* in_ptr = samples.data() + idx;
    float* out_ptr = out.data() + out_pos;
    err = soxr_process(resampler.get(), &in_ptr, std::min(div_len, ilen - idx), nullptr, &out_ptr, olen - out_pos,
                       &odone);
    out_pos += odone;
  }
  if (!err) {
    float* out_ptr = out.data() + out_pos;
    err = soxr_process(resampler.get(), nullptr, 0, nullptr, &out_ptr, olen - out_pos, &odone);
    out_pos += odone;
  }
  if (err) throw AudioError(std::string("libsoxr failed to resample: ") + err);
  out.resize(out_pos);
  return out;
}

std::vector<float> load_audio(const std::string& path, int64_t sample_rate) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw AudioError("audio file not found: " + path);
  SF_INFO info{};
  std::unique_ptr<SNDFILE, decltype(&sf_close)> file(sf_open(path.c_str(), SFM_READ, &info), &sf_close);
  if (!file) {
    throw AudioError("cannot decode audio file " + path + ": " + sf_strerror(nullptr) +
                     ". Pass a WAV, FLAC, OGG or MP3 file.");
  }
  if (info.channels < 1 || info.samplerate <= 0) {
    throw AudioError("cannot decode audio file " + path + ": it reports " + std::to_string(info.channels) +
                     " channels at " + std::to_string(info.samplerate) + " Hz");
  }
  std::vector<float> interleaved(static_cast<size_t>(info.frames) * info.channels);
  // libsndfile scales integer PCM to [-1, 1) itself, as soundfile.read(dtype="float32") does.
  const sf_count_t got = sf_readf_float(file.get(), interleaved.data(), info.frames);
  if (got < 0 || (got < info.frames && sf_error(file.get()) != SF_ERR_NO_ERROR)) {
    throw AudioError("cannot decode audio file " + path + ": " + sf_strerror(file.get()));
  }
  interleaved.resize(static_cast<size_t>(got) * info.channels);
  return resample(to_mono(interleaved, info.channels), info.samplerate, sample_rate);
}

}  // namespace parakeet
