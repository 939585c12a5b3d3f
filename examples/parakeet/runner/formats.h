// Render transcripts as text or JSON, as runtime/formats.py does (same JSON schema and layout:
// json.dumps(..., ensure_ascii=False, indent=2)), for one file or several.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "transcribe.h"

namespace parakeet {

// "none", "token", "word", "segment" or "all" -> the levels included; throws std::invalid_argument otherwise.
std::vector<std::string> timestamp_levels(const std::string& timestamps);

// One input file's outcome: its transcript, or (no transcript) the one-line error reported for it.
struct FileResult {
  std::string name;  // the path as given on the command line
  std::optional<Transcript> transcript;
  std::string error;
};

// Text: the transcript, then one "[start - end] text" line per span of the requested levels.
std::string render_text(const Transcript& t, const std::vector<std::string>& levels);
// Several files: "name<TAB>text" (plus the span lines) per transcribed file; failed files are left out.
std::string render_text(const std::vector<FileResult>& results, const std::vector<std::string>& levels);
// JSON: {"text", then each requested level: [{"text", "start", "end"[, "id"]}, ...]}.
std::string render_json(const Transcript& t, const std::vector<std::string>& levels);
// One file: its object ({"error"} if it failed); several: a list of objects with an "audio" key first, a failed
// file's being {"audio", "error"}. Byte-identical to runtime/formats.py's render(..., "json", ...).
std::string render_json(const std::vector<FileResult>& results, const std::vector<std::string>& levels);

// JSON Lines: one line {"audio", "text", then each requested level}, as json.dumps(..., ensure_ascii=False).
std::string render_jsonl(const std::string& audio, const Transcript& t, const std::vector<std::string>& levels);
// Several files, one line each; a failed file's line is {"audio", "error"} (runtime/formats.py's "jsonl").
std::string render_jsonl(const std::vector<FileResult>& results, const std::vector<std::string>& levels);

// A JSON string as json.dumps(s, ensure_ascii=False) writes it.
std::string json_string(const std::string& s);

// Python's repr() of a float (shortest round trip, with its switch to exponent notation).
std::string python_float(double v);

}  // namespace parakeet
