#include "transcribe.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "errors.h"

namespace parakeet {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", s);
  return buf;
}

void add_timing(Timings& timings, const std::string& stage, double seconds) {
  for (auto& [name, total] : timings) {
    if (name == stage) {
      total += seconds;
      return;
    }
  }
  timings.emplace_back(stage, seconds);
}

Transcriber::Transcriber(PteModel& model, const Tokenizer& tokenizer, bool check_fingerprint, const WarningSink& warn)
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

Encoded Transcriber::encode(const std::vector<float>& audio, Timings& timings) {
  const auto n = static_cast<int64_t>(audio.size());
  return encode(audio.data(), n, n, timings);
}

Encoded Transcriber::encode(const float* audio, int64_t size, int64_t valid, Timings& timings) {
  const auto& meta = model_.metadata();
  const int64_t n = valid;
  if (n > meta.max_audio_samples) {
    throw AudioRangeError("audio is " + format_seconds(static_cast<double>(n) / meta.sample_rate) +
                          " s long; this model.pte supports up to " + format_seconds(max_audio_seconds()) +
                          " s in one pass. Use buffered decoding (--chunk_seconds), split the audio, or re-export "
                          "with a larger --max-audio-seconds.");
  }
  const int64_t padded = meta.padded_samples(n);
  std::vector<float> wave;
  const float* input = audio;
  if (size != padded) {  // else already whole hops (a buffered window, or padded by the caller): no copy
    wave.assign(static_cast<size_t>(padded), 0.0f);
    std::copy(audio, audio + std::min(n, size), wave.begin());
    input = wave.data();
  }

  const auto t0 = std::chrono::steady_clock::now();
  auto [features, feature_length] = model_.preprocessor(input, padded, n);
  add_timing(timings, "preprocess", seconds_since(t0));
  const auto t1 = std::chrono::steady_clock::now();
  auto [encoded, num_frames] = model_.encoder(features, feature_length);
  add_timing(timings, "encode", seconds_since(t1));
  if (encoded.sizes.size() != 3 || num_frames < 0 || num_frames > encoded.sizes[1]) {
    throw PteModelError("encoder returned " + std::to_string(num_frames) +
                        " valid frames for an output of another shape; re-export the model");
  }
  return {std::move(encoded), num_frames};
}

TdtDecoderState Transcriber::initial_decoder_state() {
  TdtDecoderState state{model_.initial_state(), {}};
  model_.decoder_step(model_.metadata().blank_id, state.model);
  return state;
}

std::pair<std::vector<DecodedToken>, TdtDecoderState> Transcriber::decode_frames(const Encoded& encoded, int64_t first,
                                                                                 int64_t count,
                                                                                 const TdtDecoderState& state) {
  const auto& meta = model_.metadata();
  if (first < 0 || count < 0 || (count > 0 && first + count > encoded.valid_frames)) {
    throw PteModelError("frames " + std::to_string(first) + " .. " + std::to_string(first + count) +
                        " lie outside the encoder's " + std::to_string(encoded.valid_frames) + " valid frames");
  }
  TdtDecoderState next = state;
  std::vector<DecodedToken> tokens;
  try {
    tokens = greedy_tdt_decode_chunk(
        count, [&](int64_t t) { return model_.joint(encoded.frames, first + t, next.model); },
        [&](int64_t token) { model_.decoder_step(token, next.model); }, meta.blank_id, meta.durations,
        meta.max_symbols_per_step, next.position);
  } catch (const std::invalid_argument& e) {
    throw PteModelError(std::string("decoding failed: ") + e.what());
  }
  return {std::move(tokens), std::move(next)};
}

std::vector<DecodedToken> Transcriber::decode_tokens(const std::vector<float>& audio, Timings& timings) {
  timings = {{"preprocess", 0.0}, {"encode", 0.0}, {"decode", 0.0}};
  if (audio.empty()) return {};
  const Encoded encoded = encode(audio, timings);
  const auto t0 = std::chrono::steady_clock::now();
  auto tokens = decode_frames(encoded, 0, encoded.valid_frames, initial_decoder_state()).first;
  add_timing(timings, "decode", seconds_since(t0));
  return tokens;
}

std::vector<int> Transcriber::checked_ids(const std::vector<DecodedToken>& tokens) const {
  std::vector<int> ids;
  ids.reserve(tokens.size());
  for (const auto& t : tokens) {
    if (t.id < 0 || t.id >= static_cast<int64_t>(pieces_.size())) {
      throw PteModelError("the joint emitted token id " + std::to_string(t.id) + " outside the vocabulary of " +
                          std::to_string(pieces_.size()) + "; the .pte and tokenizer do not belong together");
    }
    ids.push_back(static_cast<int>(t.id));
  }
  return ids;
}

Transcript Transcriber::transcript(const std::vector<DecodedToken>& tokens, double audio_seconds,
                                   const Timings& timings) const {
  const auto& meta = model_.metadata();
  Transcript out;
  const std::vector<int> ids = checked_ids(tokens);
  std::vector<std::string> texts, pieces;
  for (int id : ids) {
    texts.push_back(tokenizer_.decode({id}));
    pieces.push_back(pieces_[id]);
  }
  out.tokens = token_spans(tokens, texts, punctuation_);
  out.words = word_spans(
      out.tokens, pieces, [this](const std::vector<std::string>& p) { return tokenizer_.decode_pieces(p); },
      punctuation_);
  out.segments = segment_spans(out.words);
  for (auto* level : {&out.tokens, &out.words, &out.segments}) {
    set_seconds(*level, meta.window_stride, meta.subsampling_factor);
  }
  out.text = transcript_text(tokenizer_.decode(ids), punctuation_);
  out.audio_seconds = audio_seconds;
  out.timings = timings;
  return out;
}

std::string Transcriber::text_of(const std::vector<DecodedToken>& tokens) const {
  return transcript_text(tokenizer_.decode(checked_ids(tokens)), punctuation_);
}

std::vector<Span> Transcriber::token_spans_of(const std::vector<DecodedToken>& tokens) const {
  const auto& meta = model_.metadata();
  std::vector<std::string> texts;
  for (int id : checked_ids(tokens)) texts.push_back(tokenizer_.decode({id}));
  auto spans = token_spans(tokens, texts, punctuation_);
  set_seconds(spans, meta.window_stride, meta.subsampling_factor);
  return spans;
}

Transcript Transcriber::transcribe(const std::vector<float>& audio) {
  Timings timings;
  const auto tokens = decode_tokens(audio, timings);
  return transcript(tokens, static_cast<double>(audio.size()) / model_.metadata().sample_rate, timings);
}

void Transcriber::warm_up(double seconds) {
  const auto& meta = model_.metadata();
  const int64_t n =
      std::min(std::max({static_cast<int64_t>(seconds * meta.sample_rate), meta.min_audio_samples, int64_t{1}}),
               meta.max_audio_samples);
  Timings timings;
  decode_tokens(std::vector<float>(static_cast<size_t>(n), 0.0f), timings);
}

}  // namespace parakeet
