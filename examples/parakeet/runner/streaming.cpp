#include "streaming.h"

namespace parakeet {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

StreamingTranscriber::StreamingTranscriber(Transcriber& transcriber, ContextSize context, bool partial)
    : transcriber_(transcriber), decoder_(transcriber, context, /*decode_partial_frame=*/true, partial) {}

StreamResult StreamingTranscriber::feed(const std::vector<float>& samples) { return result(decoder_.feed(samples)); }

StreamResult StreamingTranscriber::finish() { return result(decoder_.finish()); }

Transcript StreamingTranscriber::transcript() const {
  const double rate = static_cast<double>(transcriber_.metadata().sample_rate);
  return transcriber_.transcript(tokens_, static_cast<double>(decoder_.samples_received()) / rate, decoder_.timings());
}

StreamResult StreamingTranscriber::result(const StreamUpdate& update) {
  const auto& meta = transcriber_.metadata();
  const size_t before = tokens_.size();
  tokens_.insert(tokens_.end(), update.tokens.begin(), update.tokens.end());
  // The whole text is rendered each time: a token's text depends on its neighbours (word boundaries, the space
  // removed before punctuation), so only the difference from the previous text is new. UTF-8 byte prefixes are
  // code point prefixes, so this cuts where Python's str slicing does.
  std::string text = transcriber_.text_of(tokens_);
  StreamResult out;
  out.text = starts_with(text, text_) ? text.substr(text_.size()) : text;
  text_ = text;
  // Spans of the new tokens with the last old one in front: a punctuation mark takes its predecessor's end.
  const size_t from = before ? before - 1 : 0;
  auto spans = transcriber_.token_spans_of(std::vector<DecodedToken>(tokens_.begin() + from, tokens_.end()));
  out.tokens.assign(spans.begin() + (before && !spans.empty() ? 1 : 0), spans.end());
  if (!update.draft.empty()) {
    std::vector<DecodedToken> ahead = tokens_;
    ahead.insert(ahead.end(), update.draft.begin(), update.draft.end());
    const std::string full = transcriber_.text_of(ahead);
    out.draft_text = starts_with(full, text) ? full.substr(text.size()) : full;
  }
  const double frame_seconds = meta.window_stride * static_cast<double>(meta.subsampling_factor);
  out.final_until = static_cast<double>(update.end_frame) * frame_seconds;
  return out;
}

}  // namespace parakeet
