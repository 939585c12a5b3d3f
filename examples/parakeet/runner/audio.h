// Audio loading for transcription, as audio.py does it: decode with libsndfile, average the channels to mono,
// then resample with libsoxr's HQ filter (fed exactly as python-soxr's resample() feeds it, so both runners see
// the same waveform). Non-finite samples are refused (or zeroed on request) and a truncated file is reported, with
// the same messages as audio.py.
#pragma once

#include <sndfile.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "errors.h"

namespace parakeet {

enum class NonFinite { kRefuse, kZero };

struct LoadOptions {
  NonFinite non_finite = NonFinite::kRefuse;  // kZero: replace NaN/Inf by silence and warn
  WarningSink warn;
};

// Interleaved frames x channels -> mono, averaged in double precision as numpy's mean(axis=1, dtype=float64).
std::vector<float> to_mono(const std::vector<float>& interleaved, int channels);

// Mono float audio from `from_rate` to `to_rate` Hz; the input itself when the rates match.
std::vector<float> resample(const std::vector<float>& samples, int64_t from_rate, int64_t to_rate);

// Throws AudioError naming `name`, the first frame of `interleaved` ([frames x channels] floats) that holds NaN or
// +-Inf and its time in seconds ((offset_samples + frame) / sample_rate: the file's own rate, before resampling),
// and the fix. A block-by-block reader calls it per block with the block's offset in frames.
void check_finite(const float* interleaved, size_t frames, int channels, const std::string& name,
                  int64_t offset_samples, int64_t sample_rate);
// Replaces NaN and +-Inf by 0 in place; warns once (same report as check_finite). Returns the frames affected.
size_t zero_non_finite(float* interleaved, size_t frames, int channels, const std::string& name, int64_t offset_samples,
                       int64_t sample_rate, const WarningSink& warn);

// Warns when libsndfile's header-parse log (SFC_GET_LOG_INFO) says the header promised more audio bytes than the
// file holds; `frames` read at `sample_rate` Hz go into the message. Returns true when it warned.
bool warn_if_truncated(const std::string& name, const std::string& sndfile_log, int64_t frames, int64_t sample_rate,
                       const WarningSink& warn);

using SndFile = std::unique_ptr<SNDFILE, decltype(&sf_close)>;

// Opens a file with libsndfile and checks its header (at least one channel, a rate of 1 kHz .. 1 MHz); `log` gets
// libsndfile's header-parse log (for warn_if_truncated). Throws AudioError: missing, undecodable or damaged.
SndFile open_sndfile(const std::string& path, SF_INFO& info, std::string& log);

// check_finite, or zero_non_finite when options.non_finite is kZero.
void finite_or_zeroed(float* interleaved, size_t frames, int channels, const std::string& name, int64_t offset_samples,
                      int64_t sample_rate, const LoadOptions& options);

// A file libsndfile can decode, as float32 mono in [-1, 1] at `sample_rate`. Throws AudioError (missing or
// undecodable file, non-finite samples unless options.non_finite is kZero); warns through options.warn.
std::vector<float> load_audio(const std::string& path, int64_t sample_rate, const LoadOptions& options = {});

}  // namespace parakeet
