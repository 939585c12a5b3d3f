#include "args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

namespace parakeet::cli {

std::string usage() {
  return "usage: parakeet_runner --model_path model.pte --audio_path AUDIO [--audio_path AUDIO ...]\n"
         "                       [--tokenizer_path tokenizer.model] [--data_path FILE.ptd]\n"
         "                       [--timestamps none|token|word|segment|all] [--format text|json|jsonl]\n"
         "                       [--zero_non_finite] [--ignore_tokenizer_fingerprint] [--verbose] [--quiet]\n"
         "                       [--chunk_seconds S] [--left_context_seconds S] [--right_context_seconds S]\n"
         "                       [--repeat N] [--threads N]\n"
         "       parakeet_runner --model_path model.pte --stream - [--stream_rate HZ] [--stream_channels N]\n"
         "                       [--format text|jsonl] [--partial] [context flags as above]\n"
         "\n"
         "Transcribes each AUDIO (WAV/FLAC/OGG/MP3, any rate and channel count) with a Parakeet TDT .pte exported by\n"
         "parakeet-export. The transcripts go to stdout; stage timings and RTFx go to stderr.\n"
         "  --audio_path      repeat it for several files: each one that can be read is transcribed, each one that\n"
         "                    cannot gets an error line naming it (and an \"error\" entry in JSON); the exit status\n"
         "                    is then 2. With several files, text lines are \"AUDIO<TAB>transcript\" and JSON is a\n"
         "                    list of objects with an \"audio\" key, as parakeet-transcribe writes them\n"
         "  --tokenizer_path  default: tokenizer.model next to the model\n"
         "  --timestamps      default: none for text, all for json and jsonl\n"
         "  --zero_non_finite replace NaN/Inf samples by silence (with a warning) instead of refusing the file\n"
         "  --ignore_tokenizer_fingerprint\n"
         "                    accept a tokenizer other than the one the .pte was exported with (its size must\n"
         "                    still match)\n"
         "  --verbose         also print ExecuTorch's own log lines\n"
         "  --quiet           no progress bar or per-file timings on stderr\n"
         "  --format jsonl    one JSON object per line: per file, or per decoded chunk with --stream\n"
         "  --repeat N        benchmark: transcribe each file N times in this process (warm after load), one\n"
         "                    timing line per run and the medians on stderr; the transcript is printed once\n"
         "  --threads N       CPU threads for the model (ExecuTorch's thread pool; default: one per core)\n"
         "\n"
         "Long audio: a file longer than one window (left + chunk + right context) is read block by block and\n"
         "decoded with buffered left | chunk | right decoding, in flat memory.\n"
         "  --chunk_seconds          audio decoded per window (default: the .pte's bound less both contexts,\n"
         "                           evened out over the file; --stream 1.6); 0 = one pass, refusing audio past\n"
         "                           the .pte's bound\n"
         "  --left_context_seconds   audio before the chunk the encoder sees (default 4; --stream 10)\n"
         "  --right_context_seconds  audio after the chunk the encoder sees (default 2; --stream 1.6)\n"
         "\n"
         "Live audio: --stream - reads raw signed 16-bit little-endian PCM from standard input and prints text as\n"
         "each chunk is decided (e.g. arecord -f S16_LE -r 16000 -c 1 -t raw | parakeet_runner ... --stream -);\n"
         "end of input or Ctrl-C flushes the last chunk. Microphone capture (--mic) is in the Python runner only\n"
         "(parakeet-transcribe --mic).\n"
         "  --stream_rate      sample rate of the PCM (default 16000)\n"
         "  --stream_channels  channels of the PCM (default 1)\n"
         "  --partial          also show a draft of the right context (stderr for text, 'draft' key for jsonl)\n";
}

namespace {

double parse_seconds(const std::string& flag, const std::string& value) {
  // strtod reads what Python's float() reads here (decimal, exponent, inf, nan), surrounding spaces included; an
  // overflow gives inf as float('1e400') does, which the context checks then reject by name.
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  while (end && *end == ' ') ++end;
  if (value.empty() || end == value.c_str() || *end != '\0') {
    throw UsageError(flag + " must be a number of seconds, not '" + value + "'");
  }
  return v;
}

int parse_positive_int(const std::string& flag, const std::string& value) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  while (end && *end == ' ') ++end;
  if (value.empty() || end == value.c_str() || *end != '\0' || errno == ERANGE || v > 1'000'000'000 ||
      v < -1'000'000'000) {
    throw UsageError(flag + " must be a whole number, not '" + value + "'");
  }
  return static_cast<int>(v);
}

void apply_numeric_flags(Options& o, const std::map<std::string, std::string>& values,
                         const std::set<std::string>& given) {
  const std::pair<const char*, std::optional<double>*> sizes[] = {
      {"--chunk_seconds", &o.chunk_seconds},
      {"--left_context_seconds", &o.left_context_seconds},
      {"--right_context_seconds", &o.right_context_seconds}};
  for (const auto& [flag, target] : sizes) {
    if (given.count(flag)) *target = parse_seconds(flag, values.at(flag));
  }
  if (given.count("--stream_rate")) o.stream_rate = parse_positive_int("--stream_rate", values.at("--stream_rate"));
  if (given.count("--repeat")) {
    o.repeat = parse_positive_int("--repeat", values.at("--repeat"));
    if (o.repeat < 1) throw UsageError("--repeat must be a positive number of runs, not " + values.at("--repeat"));
  }
  if (given.count("--threads")) {
    o.threads = parse_positive_int("--threads", values.at("--threads"));
    if (o.threads < 1 || o.threads > 1024) {
      throw UsageError("--threads must be between 1 and 1024, not " + values.at("--threads"));
    }
  }
  if (given.count("--stream_channels")) {
    o.stream_channels = parse_positive_int("--stream_channels", values.at("--stream_channels"));
  }
}

// The Python runner's usage checks for live input, in its order.
void check_stream_flags(const Options& o, bool stream) {
  if (stream && o.stream != "-") {
    throw UsageError("--stream takes '-' (standard input); pass an audio file with --audio_path instead");
  }
  if (stream && o.repeat != 1) throw UsageError("--repeat is for audio files; it cannot be used with --stream");
  if (stream && !o.audio_paths.empty()) throw UsageError("--audio_path and --stream are exclusive; pass one of them");
  if (stream && o.format == "json") {
    throw UsageError("--format json needs the whole transcript; with --stream use text or jsonl");
  }
  if (stream && o.chunk_seconds && *o.chunk_seconds == 0) {
    throw UsageError("--chunk_seconds 0 (one pass) cannot be used with --stream");
  }
  if (o.stream_rate <= 0 || o.stream_channels <= 0) {
    throw UsageError("--stream_rate and --stream_channels must be positive");
  }
}

}  // namespace

Options parse_args(const std::vector<std::string>& args) {
  Options o;
  std::map<std::string, std::string*> valued = {{"--model_path", &o.model_path},
                                                {"--tokenizer_path", &o.tokenizer_path},
                                                {"--timestamps", &o.timestamps},
                                                {"--format", &o.format}};
  std::string audio_path;
  valued["--audio_path"] = &audio_path;
  const std::map<std::string, bool*> switches = {{"--verbose", &o.verbose},
                                                 {"--zero_non_finite", &o.zero_non_finite},
                                                 {"--ignore_tokenizer_fingerprint", &o.ignore_tokenizer_fingerprint}};
  std::string data_path;
  valued["--data_path"] = &data_path;
  bool has_data_path = false;
  std::map<std::string, std::string> numeric;  // the numeric flags' values, converted after the loop
  for (const char* flag : {"--chunk_seconds", "--left_context_seconds", "--right_context_seconds", "--stream_rate",
                           "--stream_channels", "--repeat", "--threads"}) {
    valued[flag] = &numeric[flag];
  }
  valued["--stream"] = &o.stream;
  std::set<std::string> given;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool inline_value = false;
    if (auto eq = flag.find('='); eq != std::string::npos && flag.rfind("--", 0) == 0) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      inline_value = true;
    }
    if (flag == "-h" || flag == "--help") {
      o.help = true;
      return o;
    }
    if (auto sw = switches.find(flag); sw != switches.end()) {
      if (inline_value) throw UsageError(flag + " takes no value (see --help)");
      *sw->second = true;
      continue;
    }
    if (flag == "--quiet" || flag == "--partial") {
      (flag == "--quiet" ? o.quiet : o.partial) = true;
      continue;
    }
    auto it = valued.find(flag);
    if (it == valued.end()) throw UsageError("unknown argument '" + args[i] + "' (see --help)");
    if (!inline_value) {
      if (i + 1 >= args.size()) throw UsageError(flag + " needs a value (see --help)");
      value = args[++i];
    }
    *it->second = value;
    if (flag == "--data_path") has_data_path = true;
    given.insert(flag);
    if (flag == "--audio_path") {
      if (value.empty()) throw UsageError("--audio_path needs a file name (see --help)");
      o.audio_paths.push_back(value);
    }
  }
  apply_numeric_flags(o, numeric, given);
  if (o.model_path.empty()) throw UsageError("--model_path is required (see --help)");
  if (o.audio_paths.empty() && !given.count("--stream")) throw UsageError("--audio_path is required (see --help)");
  if (o.format == "txt") o.format = "text";  // the Python runner's spelling of the same format
  if (o.format != "text" && o.format != "json" && o.format != "jsonl") {
    throw UsageError("--format must be text, json or jsonl, not '" + o.format + "'");
  }
  check_stream_flags(o, given.count("--stream") > 0);
  if (o.timestamps.empty()) o.timestamps = o.format == "json" || o.format == "jsonl" ? "all" : "none";
  if (o.timestamps != "none" && o.timestamps != "token" && o.timestamps != "word" && o.timestamps != "segment" &&
      o.timestamps != "all") {
    throw UsageError("--timestamps must be none, token, word, segment or all, not '" + o.timestamps + "'");
  }
  if (o.tokenizer_path.empty()) {
    o.tokenizer_path = (std::filesystem::path(o.model_path).parent_path() / "tokenizer.model").string();
  }
  if (has_data_path) o.data_path = data_path;
  return o;
}

}  // namespace parakeet::cli
