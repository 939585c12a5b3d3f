#include "args.h"

#include <filesystem>
#include <map>

namespace parakeet::cli {

std::string usage() {
  return "usage: parakeet_runner --model_path model.pte --audio_path AUDIO [--tokenizer_path tokenizer.model]\n"
         "                       [--data_path FILE.ptd] [--timestamps none|token|word|segment|all]\n"
         "                       [--format text|json] [--verbose]\n"
         "\n"
         "Transcribes AUDIO (WAV/FLAC/OGG/MP3, any rate and channel count) with a Parakeet TDT .pte exported by\n"
         "parakeet-export. The transcript goes to stdout; stage timings and RTFx go to stderr.\n"
         "  --tokenizer_path  default: tokenizer.model next to the model\n"
         "  --timestamps      default: none for text, all for json\n"
         "  --verbose         also print ExecuTorch's own log lines\n";
}

Options parse_args(const std::vector<std::string>& args) {
  Options o;
  std::map<std::string, std::string*> valued = {
      {"--model_path", &o.model_path}, {"--tokenizer_path", &o.tokenizer_path}, {"--audio_path", &o.audio_path},
      {"--timestamps", &o.timestamps}, {"--format", &o.format}};
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
    if (flag == "--verbose") {
      o.verbose = true;
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
  }
  if (o.model_path.empty()) throw UsageError("--model_path is required (see --help)");
  if (o.audio_path.empty()) throw UsageError("--audio_path is required (see --help)");
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
