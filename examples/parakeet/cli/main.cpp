// parakeet_runner: transcribe one audio file (any length), or live PCM on stdin, with an exported Parakeet TDT
// .pte, without Python.
// The transcript goes to stdout; stage timings and RTFx go to stderr. Any failure is one line on stderr and a
// non-zero exit (2, as parakeet-transcribe).
#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "../runner/audio.h"
#include "../runner/errors.h"
#include "../runner/formats.h"
#include "../runner/live.h"
#include "../runner/longform.h"
#include "../runner/pte_model.h"
#include "../runner/tokenizer.h"
#include "../runner/transcribe.h"
#include "args.h"

namespace {

int fail(const std::string& message) {
  std::string line = message;
  for (char& c : line) if (c == '\n') c = ' ';  // keep the promise of one line
  std::fprintf(stderr, "parakeet_runner: error: %s\n", line.c_str());
  return 2;
}

int run(const parakeet::cli::Options& opt) {
  using clock = std::chrono::steady_clock;
  parakeet::set_runtime_logging(opt.verbose);
  const auto t0 = clock::now();
  parakeet::PteModel model(opt.model_path, opt.data_path);
  parakeet::Tokenizer tokenizer(opt.tokenizer_path);
  parakeet::Transcriber transcriber(model, tokenizer);
  std::fprintf(stderr, "load: %.3f s\n", std::chrono::duration<double>(clock::now() - t0).count());

  if (!opt.stream.empty()) {
    return parakeet::run_live(transcriber, {parakeet::resolve_context(opt.left_context_seconds, opt.chunk_seconds,
                                                                      opt.right_context_seconds, /*live=*/true),
                                            opt.format, opt.timestamps, opt.partial, opt.stream_rate,
                                            opt.stream_channels});
  }
  const auto options = parakeet::resolve_context(opt.left_context_seconds, opt.chunk_seconds,
                                                 opt.right_context_seconds, /*live=*/false);
  const auto t1 = clock::now();
  const auto transcript = parakeet::transcribe_file(transcriber, opt.audio_path, options, opt.quiet);
  const double wall = std::chrono::duration<double>(clock::now() - t1).count();
  std::string stages;
  for (const auto& [name, seconds] : transcript.timings) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s: %.3f s", stages.empty() ? "" : ", ", name.c_str(), seconds);
    stages += buf;
  }
  const double rtfx = wall > 0 ? transcript.audio_seconds / wall : 0.0;
  const std::string how = transcript.windows ? "; " + std::to_string(transcript.windows) + " windows" : "";
  if (!opt.quiet) {
    std::fprintf(stderr, "%s: %.2f s of audio%s; %s; RTFx %.1f\n", opt.audio_path.c_str(), transcript.audio_seconds,
                 how.c_str(), stages.c_str(), rtfx);
  }

  const auto levels = parakeet::timestamp_levels(opt.timestamps);
  const std::string out = opt.format == "json"    ? parakeet::render_json(transcript, levels)
                          : opt.format == "jsonl" ? parakeet::render_jsonl(opt.audio_path, transcript, levels)
                                                  : parakeet::render_text(transcript, levels);
  std::cout << out << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  parakeet::cli::Options opt;
  try {
    opt = parakeet::cli::parse_args(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const parakeet::cli::UsageError& e) {
    return fail(e.what());
  }
  if (opt.help) {
    std::cout << parakeet::cli::usage();
    return 0;
  }
  try {
    return run(opt);
  } catch (const parakeet::RunnerError& e) {
    return fail(e.what());
  } catch (const std::exception& e) {
    return fail(std::string("unexpected failure: ") + e.what());
  }
}
