// parakeet_runner: transcribe one audio file with an exported Parakeet TDT .pte, without Python.
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

  const auto audio = parakeet::load_audio(opt.audio_path, model.metadata().sample_rate);
  const auto t1 = clock::now();
  const auto transcript = transcriber.transcribe(audio);
  const double wall = std::chrono::duration<double>(clock::now() - t1).count();
  std::string stages;
  for (const auto& [name, seconds] : transcript.timings) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s: %.3f s", stages.empty() ? "" : ", ", name.c_str(), seconds);
    stages += buf;
  }
  const double rtfx = wall > 0 ? transcript.audio_seconds / wall : 0.0;
  std::fprintf(stderr, "%s: %.2f s of audio; %s; RTFx %.1f\n", opt.audio_path.c_str(), transcript.audio_seconds,
               stages.c_str(), rtfx);

  const auto levels = parakeet::timestamp_levels(opt.timestamps);
  const std::string out = opt.format == "json" ? parakeet::render_json(transcript, levels)
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
