#include "formats.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace parakeet {
namespace {

const std::vector<Span>& level_spans(const Transcript& t, const std::string& level) {
  if (level == "tokens") return t.tokens;
  if (level == "words") return t.words;
  return t.segments;
}

}  // namespace

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);  // ensure_ascii=False: UTF-8 passes through
        }
    }
  }
  return out + "\"";
}

std::vector<std::string> timestamp_levels(const std::string& timestamps) {
  if (timestamps == "none") return {};
  if (timestamps == "token") return {"tokens"};
  if (timestamps == "word") return {"words"};
  if (timestamps == "segment") return {"segments"};
  if (timestamps == "all") return {"tokens", "words", "segments"};
  throw std::invalid_argument("--timestamps must be none, token, word, segment or all, not '" + timestamps + "'");
}

std::string python_float(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const auto e_pos = sci.find('e');
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  if (exponent < -4 || exponent >= 16) return sci;  // repr's own switch; to_chars already writes e-05 / e+16
  std::string mantissa = sci.substr(0, e_pos);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out;
  if (exponent < 0) {
    out = "0." + std::string(-exponent - 1, '0') + digits;
  } else if (static_cast<size_t>(exponent + 1) >= digits.size()) {
    out = digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
  }
  return negative ? "-" + out : out;
}

std::string render_text(const Transcript& t, const std::vector<std::string>& levels) {
  std::string out = t.text;
  for (const auto& level : levels) {
    for (const auto& s : level_spans(t, level)) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "\n[%.2f - %.2f] ", s.start, s.end);
      out += buf + s.text;
    }
  }
  return out;
}

namespace {

// One JSON object as json.dumps(..., indent=2) writes it `depth` levels deep: {"audio"?, "text", levels...}.
std::string json_transcript(const Transcript& t, const std::vector<std::string>& levels, int depth,
                            const std::string* audio) {
  const std::string in(2 * (depth + 1), ' '), in2(2 * (depth + 2), ' '), in3(2 * (depth + 3), ' ');
  std::string out = "{\n";
  if (audio) out += in + "\"audio\": " + json_string(*audio) + ",\n";
  out += in + "\"text\": " + json_string(t.text);
  for (const auto& level : levels) {
    const auto& spans = level_spans(t, level);
    out += ",\n" + in + json_string(level) + ": [";
    if (spans.empty()) {
      out += "]";
      continue;
    }
    for (size_t i = 0; i < spans.size(); ++i) {
      const Span& s = spans[i];
      out += (i ? ",\n" : "\n") + in2 + "{\n";
      out += in3 + "\"text\": " + json_string(s.text) + ",\n";
      out += in3 + "\"start\": " + python_float(s.start) + ",\n";
      out += in3 + "\"end\": " + python_float(s.end);
      if (s.id) out += ",\n" + in3 + "\"id\": " + std::to_string(*s.id);
      out += "\n" + in2 + "}";
    }
    out += "\n" + in + "]";
  }
  return out + "\n" + std::string(2 * depth, ' ') + "}";
}

std::string json_failure(const FileResult& r, int depth, bool with_audio) {
  const std::string in(2 * (depth + 1), ' ');
  std::string out = "{\n";
  if (with_audio) out += in + "\"audio\": " + json_string(r.name) + ",\n";
  return out + in + "\"error\": " + json_string(r.error) + "\n" + std::string(2 * depth, ' ') + "}";
}

}  // namespace

std::string render_json(const Transcript& t, const std::vector<std::string>& levels) {
  return json_transcript(t, levels, 0, nullptr);
}

std::string render_json(const std::vector<FileResult>& results, const std::vector<std::string>& levels) {
  if (results.size() == 1) {
    const auto& r = results[0];
    return r.transcript ? json_transcript(*r.transcript, levels, 0, nullptr) : json_failure(r, 0, false);
  }
  if (results.empty()) return "[]";
  std::string out = "[";
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    out += (i ? ",\n  " : "\n  ");
    out += r.transcript ? json_transcript(*r.transcript, levels, 1, &r.name) : json_failure(r, 1, true);
  }
  return out + "\n]";
}

std::string render_text(const std::vector<FileResult>& results, const std::vector<std::string>& levels) {
  std::string out;
  bool first = true;
  for (const auto& r : results) {
    if (!r.transcript) continue;  // its error went to stderr
    if (!first) out += "\n";
    first = false;
    out += (results.size() > 1 ? r.name + "\t" : std::string()) + render_text(*r.transcript, levels);
  }
  return out;
}

std::string render_jsonl(const std::string& audio, const Transcript& t, const std::vector<std::string>& levels) {
  std::string out = "{\"audio\": " + json_string(audio) + ", \"text\": " + json_string(t.text);
  for (const auto& level : levels) {
    out += ", " + json_string(level) + ": [";
    const auto& spans = level_spans(t, level);
    for (size_t i = 0; i < spans.size(); ++i) {
      const Span& s = spans[i];
      out += (i ? ", {\"text\": " : "{\"text\": ") + json_string(s.text) + ", \"start\": " + python_float(s.start) +
             ", \"end\": " + python_float(s.end);
      if (s.id) out += ", \"id\": " + std::to_string(*s.id);
      out += "}";
    }
    out += "]";
  }
  return out + "}";
}

std::string render_jsonl(const std::vector<FileResult>& results, const std::vector<std::string>& levels) {
  std::string out;
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    if (i) out += "\n";
    out += r.transcript ? render_jsonl(r.name, *r.transcript, levels)
                        : "{\"audio\": " + json_string(r.name) + ", \"error\": " + json_string(r.error) + "}";
  }
  return out;
}

}  // namespace parakeet
