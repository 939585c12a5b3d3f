#include "timestamps.h"

#include "utf8.h"

namespace parakeet {
namespace {

const std::string kWordSeparator = " ";
const std::string kBoundary = "\xE2\x96\x81";  // '▁', SentencePiece's word-boundary marker

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The Python side's regex ^(\[.*\]$|<.*>$|##|▁|\s*$) on one piece.
bool is_special_piece(const std::string& piece) {
  const auto cps = utf8::decode(piece);
  bool all_space = true;
  for (char32_t cp : cps) all_space = all_space && utf8::is_space(cp);
  if (all_space) return true;
  if (starts_with(piece, "##") || starts_with(piece, kBoundary)) return true;
  const bool has_newline = piece.find('\n') != std::string::npos;  // '.' in the regex stops at a newline
  if (!has_newline && piece.size() >= 2 &&
      ((piece.front() == '[' && piece.back() == ']') || (piece.front() == '<' && piece.back() == '>'))) {
    return true;
  }
  return false;
}

bool contains(const Punctuation& p, const std::string& s) { return p.count(s) > 0; }

const std::string* next_visible_text(const std::vector<Span>& spans, size_t i) {
  for (size_t k = i + 1; k < spans.size(); ++k) {
    if (!spans[k].text.empty() && spans[k].text != kWordSeparator) return &spans[k].text;
  }
  return nullptr;
}

Span make_span(std::string text, int64_t start, int64_t end) {
  Span s;
  s.text = std::move(text);
  s.start_offset = start;
  s.end_offset = end;
  return s;
}

}  // namespace

Punctuation punctuation_of_vocab(const std::vector<std::string>& pieces) {
  Punctuation out;
  for (const auto& piece : pieces) {
    if (is_special_piece(piece)) continue;
    for (char32_t cp : utf8::decode(piece)) {
      if (utf8::is_punctuation(cp)) out.insert(utf8::encode(cp));
    }
  }
  return out;
}

std::string transcript_text(const std::string& decoded, const Punctuation& punctuation) {
  if (punctuation.empty()) return decoded;
  const auto cps = utf8::decode(decoded);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (utf8::is_space(cps[i]) && i + 1 < cps.size() && contains(punctuation, utf8::encode(cps[i + 1]))) {
      out += utf8::encode(cps[i + 1]);
      ++i;  // non-overlapping, left to right, as re.sub
      continue;
    }
    out += utf8::encode(cps[i]);
  }
  return out;
}

std::vector<Span> token_spans(const std::vector<DecodedToken>& tokens, const std::vector<std::string>& texts,
                              const Punctuation& punctuation) {
  std::vector<Span> spans;
  for (size_t i = 0; i < tokens.size() && i < texts.size(); ++i) {
    Span s = make_span(texts[i], tokens[i].frame, tokens[i].frame + tokens[i].duration);
    s.id = tokens[i].id;
    spans.push_back(std::move(s));
  }
  // TDT often emits punctuation late; NeMo pins it to the end of the token it follows.
  for (size_t i = 1; i < spans.size(); ++i) {
    if (contains(punctuation, spans[i].text)) spans[i].start_offset = spans[i].end_offset = spans[i - 1].end_offset;
  }
  return spans;
}

std::vector<Span> word_spans(std::vector<Span> spans, const std::vector<std::string>& pieces,
                             const DecodePiecesFn& decode_pieces, const Punctuation& punctuation) {
  std::vector<Span> words;
  std::vector<std::string> current;  // pieces of the word being built
  size_t first = 0;                  // index of the word's first token
  const size_t n = std::min(spans.size(), pieces.size());
  for (size_t i = 0; i < n; ++i) {
    const Span& span = spans[i];
    const std::string& piece = pieces[i];
    const std::string& text = span.text;
    const bool is_punct = !punctuation.empty() && contains(punctuation, text) && text != kWordSeparator;
    const std::string* following = next_visible_text(spans, i);
    const bool starts_word =
        piece != text || (text == kWordSeparator && (following == nullptr || !contains(punctuation, *following)));
    if (starts_word && !is_punct) {
      if (!current.empty()) {
        words.push_back(make_span(decode_pieces(current), spans[first].start_offset, spans[i - 1].end_offset));
      }
      current.clear();
      if (text != kWordSeparator) {
        current.push_back(piece);
        first = i;
      }
    } else if (is_punct && current.empty() && !words.empty()) {
      Span& last = words.back();
      last.end_offset = span.end_offset;
      if (ends_with(last.text, " ")) last.text.pop_back();
      last.text += text;
    } else if (is_punct && !current.empty()) {
      const std::string& tail = current.back();
      if (tail == " " || tail == "_" || tail == kBoundary) current.pop_back();
      current.push_back(piece);
    } else {
      if (current.empty()) first = i;
      current.push_back(piece);
    }
  }
  if (words.empty()) {
    if (!current.empty()) {
      words.push_back(make_span(decode_pieces(current), spans[0].start_offset, spans[n - 1].end_offset));
    }
    return words;
  }
  words[0].start_offset = spans[0].start_offset;
  if (!current.empty()) {
    words.push_back(make_span(decode_pieces(current), spans[first].start_offset, spans[n - 1].end_offset));
  }
  return words;
}

std::vector<Span> segment_spans(const std::vector<Span>& words) {
  std::vector<Span> segments;
  std::vector<std::string> current;
  size_t first = 0;
  auto joined = [&current]() {
    std::string out;
    for (size_t k = 0; k < current.size(); ++k) out += (k ? " " : "") + current[k];
    return out;
  };
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& text = words[i].text;
    // The separators are ASCII, so looking at the last byte is looking at the last character.
    if (!text.empty() && (text.back() == '.' || text.back() == '?' || text.back() == '!')) {
      current.push_back(text);
      segments.push_back(make_span(joined(), words[first].start_offset, words[i].end_offset));
      current.clear();
      first = i + 1;
      continue;
    }
    current.push_back(text);
  }
  if (!current.empty()) segments.push_back(make_span(joined(), words[first].start_offset, words.back().end_offset));
  return segments;
}

void set_seconds(std::vector<Span>& spans, double window_stride, int64_t subsampling_factor) {
  for (auto& s : spans) {
    s.start = static_cast<double>(s.start_offset) * window_stride * static_cast<double>(subsampling_factor);
    s.end = static_cast<double>(s.end_offset) * window_stride * static_cast<double>(subsampling_factor);
  }
}

}  // namespace parakeet
