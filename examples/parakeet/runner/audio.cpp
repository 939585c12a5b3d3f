#include "audio.h"

#include <sndfile.h>
#include <soxr.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>
#include <sstream>

#include "errors.h"

namespace parakeet {
namespace {

// Sample rates a real recording has; a header outside them is damaged (and resampling from it would make an
// absurdly long or short waveform). Same bounds as audio.py.
constexpr int64_t kMinFileRate = 1000, kMaxFileRate = 1000000;
constexpr sf_count_t kReadBlockFrames = 65536;
constexpr long long kUnknownLength = 0xFFFFFFFFLL;  // streaming writers' size when they cannot seek back

std::string decode_error(const std::string& path, std::string reason) {
  while (!reason.empty() && (reason.back() == '.' || std::isspace(static_cast<unsigned char>(reason.back())))) {
    reason.pop_back();
  }
  return "cannot decode audio file " + path + ": " + reason + ". Pass a WAV, FLAC, OGG or MP3 file.";
}

// Python's str() of a non-finite float.
std::string non_finite_name(float v) {
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

struct NonFiniteScan {
  size_t count = 0;
  size_t first = 0;
  float value = 0.0f;
};

NonFiniteScan scan_non_finite(const float* interleaved, size_t frames, int channels) {
  NonFiniteScan s;
  for (size_t f = 0; f < frames; ++f) {
    bool bad = false;
    for (int c = 0; c < channels; ++c) {
      const float v = interleaved[f * channels + c];
      if (!std::isfinite(v)) {
        if (!bad && s.count == 0) s.value = v;
        bad = true;
      }
    }
    if (bad) {
      if (s.count == 0) s.first = f;
      ++s.count;
    }
  }
  return s;
}

std::string non_finite_report(const NonFiniteScan& s, const std::string& name, int64_t offset_samples,
                              int64_t sample_rate) {
  const int64_t frame = offset_samples + static_cast<int64_t>(s.first);
  char seconds[48];
  std::snprintf(seconds, sizeof seconds, "%.3f", static_cast<double>(frame) / static_cast<double>(sample_rate));
  return name + ": sample " + std::to_string(frame) + " at " + seconds + " s is " + non_finite_name(s.value) + " (" +
         std::to_string(s.count) + " non-finite sample" + (s.count != 1 ? "s" : "") + ")";
}

}  // namespace

void check_finite(const float* interleaved, size_t frames, int channels, const std::string& name,
                  int64_t offset_samples, int64_t sample_rate) {
  const auto s = scan_non_finite(interleaved, frames, channels);
  if (s.count) {
    throw AudioError(non_finite_report(s, name, offset_samples, sample_rate) +
                     "; audio must hold finite numbers. Repair the file, or pass --zero_non_finite to replace "
                     "them with silence.");
  }
}

size_t zero_non_finite(float* interleaved, size_t frames, int channels, const std::string& name, int64_t offset_samples,
                       int64_t sample_rate, const WarningSink& warn) {
  const auto s = scan_non_finite(interleaved, frames, channels);
  if (!s.count) return 0;
  for (size_t i = 0; i < frames * static_cast<size_t>(channels); ++i) {
    if (!std::isfinite(interleaved[i])) interleaved[i] = 0.0f;
  }
  if (warn) warn(non_finite_report(s, name, offset_samples, sample_rate) + "; replaced by silence");
  return s.count;
}

bool warn_if_truncated(const std::string& name, const std::string& sndfile_log, int64_t frames, int64_t sample_rate,
                       const WarningSink& warn) {
  // libsndfile logs "data : 352000 (should be 175961)" (WAV, W64, RF64) or "SSND : ..." (AIFF) when the header
  // promises more than the file holds, then reads what is there without an error. Same pattern as audio.py.
  static const std::regex truncated(R"(^\s*(data|SSND)\s*:\s*(\d+)\s*\(should be (\d+)\))");
  std::istringstream lines(sndfile_log);
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, truncated)) continue;
    if (m[2].length() > 18 || m[3].length() > 18) continue;  // not a size libsndfile could have read
    const long long promised = std::stoll(m[2]), present = std::stoll(m[3]);
    if (promised <= present || promised == kUnknownLength) continue;
    char seconds[48];
    std::snprintf(seconds, sizeof seconds, "%.2f", static_cast<double>(frames) / static_cast<double>(sample_rate));
    if (warn) {
      warn(name + " is truncated: its header promises " + std::to_string(promised) +
           " bytes of audio but the file holds " + std::to_string(present) + "; transcribing the " + seconds +
           " s that are there. Re-copy or re-encode the file if the rest matters.");
    }
    return true;
  }
  return false;
}

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

SndFile open_sndfile(const std::string& path, SF_INFO& info, std::string& log) {
  std::error_code ec;
  // The same three refusals, in the same words, as the Python runner's audio.check_audio_path.
  if (std::filesystem::is_directory(path, ec)) throw AudioError("audio path is a folder, not a file: " + path);
  if (!std::filesystem::is_regular_file(path, ec)) throw AudioError("audio file not found: " + path);
  if (std::filesystem::file_size(path, ec) == 0 && !ec) throw AudioError("audio file is empty (0 bytes): " + path);
  info = SF_INFO{};
  SndFile file(sf_open(path.c_str(), SFM_READ, &info), &sf_close);
  if (!file) throw AudioError(decode_error(path, sf_strerror(nullptr)));
  if (info.channels < 1 || info.samplerate < kMinFileRate || info.samplerate > kMaxFileRate) {
    throw AudioError("cannot decode audio file " + path + ": it reports " + std::to_string(info.channels) +
                     " channels at " + std::to_string(info.samplerate) +
                     " Hz (expected 1000 to 1000000 Hz; the "
                     "header is probably damaged). Re-encode it, e.g. as 16 kHz WAV.");
  }
  char buf[16384] = {0};
  sf_command(file.get(), SFC_GET_LOG_INFO, buf, sizeof buf - 1);
  log = buf;
  return file;
}

void finite_or_zeroed(float* interleaved, size_t frames, int channels, const std::string& name, int64_t offset_samples,
                      int64_t sample_rate, const LoadOptions& options) {
  if (options.non_finite == NonFinite::kZero) {
    zero_non_finite(interleaved, frames, channels, name, offset_samples, sample_rate, options.warn);
  } else {
    check_finite(interleaved, frames, channels, name, offset_samples, sample_rate);
  }
}

std::vector<float> load_audio(const std::string& path, int64_t sample_rate, const LoadOptions& options) {
  SF_INFO info{};
  std::string log;
  SndFile file = open_sndfile(path, info, log);
  // Read in blocks up to the frame count the header gives (as soundfile.read does), so that memory follows what
  // the file really holds rather than what a damaged header claims.
  const size_t channels = static_cast<size_t>(info.channels);
  std::vector<float> interleaved;
  sf_count_t total = 0;
  while (total < info.frames) {
    const sf_count_t want = std::min(kReadBlockFrames, info.frames - total);
    interleaved.resize(static_cast<size_t>(total + want) * channels);
    // libsndfile scales integer PCM to [-1, 1) itself, as soundfile.read(dtype="float32") does.
    const sf_count_t got = sf_readf_float(file.get(), interleaved.data() + static_cast<size_t>(total) * channels, want);
    if (got < 0) throw AudioError(decode_error(path, sf_strerror(file.get())));
    total += got;
    if (got < want) {
      if (sf_error(file.get()) != SF_ERR_NO_ERROR) throw AudioError(decode_error(path, sf_strerror(file.get())));
      break;
    }
  }
  interleaved.resize(static_cast<size_t>(total) * channels);
  warn_if_truncated(path, log, total, info.samplerate, options.warn);
  finite_or_zeroed(interleaved.data(), static_cast<size_t>(total), info.channels, path, 0, info.samplerate, options);
  return resample(to_mono(interleaved, info.channels), info.samplerate, sample_rate);
}

}  // namespace parakeet
