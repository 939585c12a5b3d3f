// Command-line parsing for parakeet_runner, kept apart from the transcription logic in runner/.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace parakeet::cli {

struct Options {
  std::string model_path;
  std::string tokenizer_path;            // default: tokenizer.model next to the model
  std::vector<std::string> audio_paths;  // --audio_path, repeated for several files, transcribed in this order
  std::optional<std::string> data_path;
  std::string timestamps;  // default: none for text, all for json (as parakeet-transcribe)
  std::string format = "text";
  bool zero_non_finite = false;               // replace NaN/Inf samples by silence instead of refusing the file
  bool ignore_tokenizer_fingerprint = false;  // accept a tokenizer of the right size from another export
  bool verbose = false;
  bool help = false;
  // Long and live audio (buffered decoding); an unset size takes the file or live default (runner/longform.h).
  std::optional<double> chunk_seconds, left_context_seconds, right_context_seconds;
  std::string stream;  // "-": raw 16-bit PCM on standard input
  int stream_rate = 16000;
  int stream_channels = 1;
  bool partial = false;
  bool quiet = false;
  int repeat = 1;   // benchmark: transcribe each file this many times in one process
  int threads = 0;  // CPU threads (ExecuTorch's thread pool); 0: its default, one per core
};

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Accepts "--flag value" and "--flag=value". Throws UsageError naming the problem.
Options parse_args(const std::vector<std::string>& args);
std::string usage();

}  // namespace parakeet::cli
