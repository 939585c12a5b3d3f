#include "transcribe.h"

#include <chrono>
#include <cstdio>

#include "errors.h"

namespace parakeet {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", s);
  return buf;
}

}  // namespace

Transcriber::Transcriber(PteModel& model, const Tokenizer& tokenizer, bool check_fingerprint,
                         const WarningSink& warn)
    : model_(model), tokenizer_(tokenizer) {
  tokenizer.check_vocab(model.metadata().vocab_size);
  if (check_fingerprint) tokenizer.check_fingerprint(model.metadata().tokenizer_sha256, model.path(), warn);
  for (int i = 0; i < tokenizer.vocab_size(); ++i) pieces_.push_back(tokenizer.piece(i));
  punctuation_ = punctuation_of_vocab(pieces_);
}

double Transcriber::max_audio_seconds() const {
  const auto& meta = model_.metadata();
  return static_cast<double>(meta.max_audio_samples) / meta.sample_rate;
}

std::vector<DecodedToken> Transcriber::decode_tokens(const std::vector<float>& audio,
                                                     std::vector<std::pair<std::string, double>>& timings) {
  const auto& meta = model_.metadata();
  const auto n = static_cast<int64_t>(audio.size());
  if (n > meta.max_audio_samples) {
    throw AudioRangeError("audio is " + format_seconds(static_cast<double>(n) / meta.sample_rate) +
                          " s long; this model.pte supports up to " + format_seconds(max_audio_seconds()) +
                          " s. Split the audio, or re-export with a larger --max-audio-seconds.");
  }
  timings = {{"preprocess", 0.0}, {"encode", 0.0}, {"decode", 0.0}};
  if (n == 0) return {};
  // The preprocessor takes a whole number of hops and at least its traced minimum; the zeros added here lie past
  // `length`, where NeMo's featurizer masks them out, exactly as batch padding in NeMo.
  const int64_t hop = meta.hop_length;
  const int64_t padded = std::max((n + hop - 1) / hop * hop, meta.min_audio_samples);
  std::vector<float> wave(static_cast<size_t>(padded), 0.0f);
  std::copy(audio.begin(), audio.end(), wave.begin());

  const auto t0 = std::chrono::steady_clock::now();
  auto [features, feature_length] = model_.preprocessor(wave, n);
  const double preprocess_s = seconds_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  auto [encoded, num_frames] = model_.encoder(features, feature_length);
  const double encode_s = seconds_since(t1);
  const auto t2 = std::chrono::steady_clock::now();
  if (encoded.sizes.size() != 3 || num_frames > encoded.sizes[1]) {
    throw PteModelError("encoder returned " + std::to_string(num_frames) +
                        " valid frames for an output of another shape; re-export the model");
  }
  auto state = model_.initial_state();
  std::vector<DecodedToken> tokens;
  try {
    tokens = greedy_tdt_decode(
        num_frames, [&](int64_t t) { return model_.joint(encoded, t, state); },
        [&](int64_t token) { model_.decoder_step(token, state); }, meta.blank_id, meta.durations,
        meta.max_symbols_per_step);
  } catch (const std::invalid_argument& e) {
    throw PteModelError(std::string("decoding failed: ") + e.what());
  }
  timings = {{"preprocess", preprocess_s}, {"encode", encode_s}, {"decode", seconds_since(t2)}};
  return tokens;
}

Transcript Transcriber::transcribe(const std::vector<float>& audio) {
  const auto& meta = model_.metadata();
  Transcript out;
  const auto tokens = decode_tokens(audio, out.timings);
  std::vector<int> ids;
  std::vector<std::string> texts, pieces;
  for (const auto& t : tokens) {
    if (t.id < 0 || t.id >= static_cast<int64_t>(pieces_.size())) {
      throw PteModelError("the joint emitted token id " + std::to_string(t.id) + " outside the vocabulary of " +
                          std::to_string(pieces_.size()) + "; the .pte and tokenizer do not belong together");
    }
    ids.push_back(static_cast<int>(t.id));
    texts.push_back(tokenizer_.decode({static_cast<int>(t.id)}));
    pieces.push_back(pieces_[t.id]);
  }
  out.tokens = token_spans(tokens, texts, punctuation_);
  out.words = word_spans(out.tokens, pieces,
                         [this](const std::vector<std::string>& p) { return tokenizer_.decode_pieces(p); },
                         punctuation_);
  out.segments = segment_spans(out.words);
  for (auto* level : {&out.tokens, &out.words, &out.segments}) {
    set_seconds(*level, meta.window_stride, meta.subsampling_factor);
  }
  out.text = transcript_text(tokenizer_.decode(ids), punctuation_);
  out.audio_seconds = static_cast<double>(audio.size()) / meta.sample_rate;
  return out;
}

}  // namespace parakeet
