#include "args.h"

#include <filesystem>
#include <map>

namespace parakeet::cli {

std::string usage() {
  return "usage: parakeet_runner --model_path model.pte --audio_path AUDIO [--audio_path AUDIO ...]\n"
         "                       [--tokenizer_path tokenizer.model] [--data_path FILE.ptd]\n"
         "                       [--timestamps none|token|word|segment|all] [--format text|json]\n"
         "                       [--zero_non_finite] [--ignore_tokenizer_fingerprint] [--verbose]\n"
         "\n"
         "Transcribes each AUDIO (WAV/FLAC/OGG/MP3, any rate and channel count) with a Parakeet TDT .pte exported by\n"
         "parakeet-export. The transcripts go to stdout; stage timings and RTFx go to stderr.\n"
         "  --audio_path      repeat it for several files: each one that can be read is transcribed, each one that\n"
         "                    cannot gets an error line naming it (and an \"error\" entry in JSON); the exit status\n"
         "                    is then 2. With several files, text lines are \"AUDIO<TAB>transcript\" and JSON is a\n"
         "                    list of objects with an \"audio\" key, as parakeet-transcribe writes them\n"
         "  --tokenizer_path  default: tokenizer.model next to the model\n"
         "  --timestamps      default: none for text, all for json\n"
         "  --zero_non_finite replace NaN/Inf samples by silence (with a warning) instead of refusing the file\n"
         "  --ignore_tokenizer_fingerprint\n"
         "                    accept a tokenizer other than the one the .pte was exported with (its size must\n"
         "                    still match)\n"
         "  --verbose         also print ExecuTorch's own log lines\n";
}

Options parse_args(const std::vector<std::string>& args) {
  Options o;
  std::map<std::string, std::string*> valued = {
      {"--model_path", &o.model_path}, {"--tokenizer_path", &o.tokenizer_path},
      {"--timestamps", &o.timestamps}, {"--format", &o.format}};
  std::string audio_path;
  valued["--audio_path"] = &audio_path;
  const std::map<std::string, bool*> switches = {{"--verbose", &o.verbose},
                                                 {"--zero_non_finite", &o.zero_non_finite},
                                                 {"--ignore_tokenizer_fingerprint", &o.ignore_tokenizer_fingerprint}};
  std::string data_path;
  valued["--data_path"] = &data_path;
  bool has_data_path = false;
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
    auto it = valued.find(flag);
    if (it == valued.end()) throw UsageError("unknown argument '" + args[i] + "' (see --help)");
    if (!inline_value) {
      if (i + 1 >= args.size()) throw UsageError(flag + " needs a value (see --help)");
      value = args[++i];
    }
    *it->second = value;
    if (flag == "--data_path") has_data_path = true;
    if (flag == "--audio_path") {
      if (value.empty()) throw UsageError("--audio_path needs a file name (see --help)");
      o.audio_paths.push_back(value);
    }
  }
  if (o.model_path.empty()) throw UsageError("--model_path is required (see --help)");
  if (o.audio_paths.empty()) throw UsageError("--audio_path is required (see --help)");
  if (o.format != "text" && o.format != "json") {
    throw UsageError("--format must be text or json, not '" + o.format + "'");
  }
  if (o.timestamps.empty()) o.timestamps = o.format == "json" ? "all" : "none";
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
