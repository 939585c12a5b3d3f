// Audio loading for transcription, as audio.py does it: decode with libsndfile, average the channels to mono,
// then resample with libsoxr's HQ filter (fed exactly as python-soxr's resample() feeds it, so both runners see
// the same waveform).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace parakeet {

// Interleaved frames x channels -> mono, averaged in double precision as numpy's mean(axis=1, dtype=float64).
std::vector<float> to_mono(const std::vector<float>& interleaved, int channels);

// Mono float audio from `from_rate` to `to_rate` Hz; the input itself when the rates match.
std::vector<float> resample(const std::vector<float>& samples, int64_t from_rate, int64_t to_rate);

// A file libsndfile can decode, as float32 mono in [-1, 1] at `sample_rate`. Throws AudioError.
std::vector<float> load_audio(const std::string& path, int64_t sample_rate);

}  // namespace parakeet
