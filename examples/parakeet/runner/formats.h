// Render a transcript as text or JSON, as runtime/formats.py does for one file (same JSON schema and layout:
// json.dumps(..., ensure_ascii=False, indent=2)).
#pragma once

#include <string>
#include <vector>

#include "transcribe.h"

namespace parakeet {

// "none", "token", "word", "segment" or "all" -> the levels included; throws std::invalid_argument otherwise.
std::vector<std::string> timestamp_levels(const std::string& timestamps);

// Text: the transcript, then one "[start - end] text" line per span of the requested levels.
std::string render_text(const Transcript& t, const std::vector<std::string>& levels);
// JSON: {"text", then each requested level: [{"text", "start", "end"[, "id"]}, ...]}.
std::string render_json(const Transcript& t, const std::vector<std::string>& levels);

// JSON Lines: one line {"audio", "text", then each requested level}, as json.dumps(..., ensure_ascii=False).
std::string render_jsonl(const std::string& audio, const Transcript& t, const std::vector<std::string>& levels);

// A JSON string as json.dumps(s, ensure_ascii=False) writes it.
std::string json_string(const std::string& s);

// Python's repr() of a float (shortest round trip, with its switch to exponent notation).
std::string python_float(double v);

}  // namespace parakeet
