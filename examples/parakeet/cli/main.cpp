// parakeet_runner: transcribe audio files of any length, or live PCM on stdin, with an exported Parakeet TDT .pte,
// without Python. The transcripts go to stdout; stage timings and RTFx go to stderr. A failure to load the model or
// tokenizer, or a bad flag, is one line on stderr and exit 2 (as parakeet-transcribe); a file that cannot be
// transcribed gets one error line naming it, the other files are still transcribed, and the exit status is then 2.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>
#ifdef __GLIBC__  // defined by the C library's headers included above
#include <malloc.h>
#endif

#include "../runner/audio.h"
#include "../runner/cpu_threads.h"
#include "../runner/errors.h"
#include "../runner/formats.h"
#include "../runner/live.h"
#include "../runner/longform.h"
#include "../runner/pte_model.h"
#include "../runner/tokenizer.h"
#include "../runner/transcribe.h"
#include "args.h"

namespace {

std::string one_line(std::string line) {
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  return line;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "parakeet_runner: error: %s\n", one_line(message).c_str());  // the promise of one line
  return 2;
}

void warn(const std::string& message) {
  std::fprintf(stderr, "parakeet_runner: warning: %s\n", one_line(message).c_str());
}

// The message for a file's failure, naming the file unless the message already does.
std::string naming(const std::string& path, const std::string& message) {
  return message.find(path) != std::string::npos ? message : path + ": " + message;
}

// "preprocess: a s, encode: b s, decode: c s; wall: w s; RTFx r", as parakeet-transcribe prints it (the benchmarks
// parse both).
std::string figures(const parakeet::Timings& timings, double audio_seconds, double wall) {
  std::string line;
  char buf[96];
  for (size_t i = 0; i < timings.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%s: %.3f s", i ? ", " : "", timings[i].first.c_str(), timings[i].second);
    line += buf;
  }
  std::snprintf(buf, sizeof buf, "; wall: %.3f s; RTFx %.1f", wall, wall > 0 ? audio_seconds / wall : 0.0);
  return line + buf;
}

// "S s of audio[; W windows]; " and the figures of one run.
std::string timing_line(const parakeet::Transcript& t, double wall) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f s of audio", t.audio_seconds);
  const std::string windows = t.windows ? "; " + std::to_string(t.windows) + " windows" : "";
  return buf + windows + "; " + figures(t.timings, t.audio_seconds, wall);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Transcribes `path` `repeat` times (a benchmark when more than once: one timing line per run, then the medians);
// returns the last run's transcript, or nullopt with `error` set.
std::optional<parakeet::Transcript> transcribe_file(parakeet::Transcriber& transcriber, const std::string& path,
                                                    const parakeet::LongFormOptions& options, bool quiet, int repeat,
                                                    const parakeet::LoadOptions& load_options, std::string& error) {
  using clock = std::chrono::steady_clock;
  try {
    parakeet::Transcript last;
    std::string first_text;
    std::vector<parakeet::Timings> stages;  // per run
    std::vector<double> walls;
    for (int i = 1; i <= repeat; ++i) {
      const auto t1 = clock::now();
      last = parakeet::transcribe_file(transcriber, path, options, quiet, load_options);
      walls.push_back(std::chrono::duration<double>(clock::now() - t1).count());
      stages.push_back(last.timings);
      if (!quiet) {
        const std::string run = repeat > 1 ? " (run " + std::to_string(i) + "/" + std::to_string(repeat) + ")" : "";
        std::fprintf(stderr, "%s%s: %s\n", path.c_str(), run.c_str(), timing_line(last, walls.back()).c_str());
      }
      if (i == 1) {
        first_text = last.text;
      } else if (last.text != first_text) {
        warn(path + ": run " + std::to_string(i) + " gave another transcript than run 1");
      }
    }
    if (repeat > 1 && !quiet) {
      parakeet::Timings medians = last.timings;
      for (size_t k = 0; k < medians.size(); ++k) {
        std::vector<double> v;
        for (const auto& t : stages)
          if (k < t.size()) v.push_back(t[k].second);
        medians[k].second = median(v);
      }
      std::fprintf(stderr, "%s: median of %d runs: %s\n", path.c_str(), repeat,
                   figures(medians, last.audio_seconds, median(walls)).c_str());
    }
    return last;
  } catch (const parakeet::AudioError& e) {
    error = naming(path, one_line(e.what()));
  } catch (const parakeet::PteModelError& e) {
    error = naming(path, one_line(e.what()));
  } catch (const std::bad_alloc&) {
    error = naming(path, "out of memory while reading or transcribing it");
  } catch (const std::exception& e) {
    error = naming(path, std::string("unexpected failure: ") + one_line(e.what()));
  }
  std::fprintf(stderr, "parakeet_runner: error: %s\n", error.c_str());
  return std::nullopt;
}

int run(const parakeet::cli::Options& opt) {
  using clock = std::chrono::steady_clock;
  parakeet::set_runtime_logging(opt.verbose);
  if (opt.threads > 0) {
    parakeet::set_cpu_threads(opt.threads);  // before the first method runs on the pool
    if (const std::string w = parakeet::oversubscription_warning(opt.threads); !w.empty()) warn(w);
  }
  const auto t0 = clock::now();
  parakeet::PteModel model(opt.model_path, opt.data_path);
  parakeet::Tokenizer tokenizer(opt.tokenizer_path);
  parakeet::Transcriber transcriber(model, tokenizer, !opt.ignore_tokenizer_fingerprint, warn);
  transcriber.warm_up();  // the runtime's first-call cost belongs to loading, not to the first file's timing
  const double load_s = std::chrono::duration<double>(clock::now() - t0).count();
  if (const int threads = parakeet::cpu_threads(); threads > 0) {
    std::fprintf(stderr, "load: %.3f s, %d CPU threads\n", load_s, threads);
  } else {
    std::fprintf(stderr, "load: %.3f s\n", load_s);
  }

  if (!opt.stream.empty()) {
    return parakeet::run_live(
        transcriber, {parakeet::resolve_context(opt.left_context_seconds, opt.chunk_seconds, opt.right_context_seconds,
                                                /*live=*/true),
                      opt.format, opt.timestamps, opt.partial, opt.stream_rate, opt.stream_channels});
  }
  const auto options =
      parakeet::resolve_context(opt.left_context_seconds, opt.chunk_seconds, opt.right_context_seconds, /*live=*/false);
  if (options.chunk_seconds != 0.0) parakeet::context_frames(transcriber, options);  // bad sizes fail before any file
  parakeet::LoadOptions load_options;
  load_options.non_finite = opt.zero_non_finite ? parakeet::NonFinite::kZero : parakeet::NonFinite::kRefuse;
  load_options.warn = warn;
  std::vector<parakeet::FileResult> results;
  size_t failed = 0;
  for (const auto& path : opt.audio_paths) {
    parakeet::FileResult r;
    r.name = path;
    r.transcript = transcribe_file(transcriber, path, options, opt.quiet, opt.repeat, load_options, r.error);
    failed += !r.transcript;
    results.push_back(std::move(r));
  }

  const auto levels = parakeet::timestamp_levels(opt.timestamps);
  if (failed < results.size()) {  // nothing on stdout when no file could be transcribed
    std::cout << (opt.format == "json"    ? parakeet::render_json(results, levels)
                  : opt.format == "jsonl" ? parakeet::render_jsonl(results, levels)
                                          : parakeet::render_text(results, levels))
              << std::endl;
  }
  if (failed && results.size() > 1) {
    std::fprintf(stderr, "parakeet_runner: %zu of %zu files failed\n", failed, results.size());
  }
  return failed ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef __GLIBC__
  // Window-sized buffers (audio, features, encoder output) are allocated and freed once per window; with glibc's
  // adaptive mmap threshold they soon come from the heap, which keeps freed space, and a long run's peak RSS creeps
  // up. A fixed threshold keeps each in its own mapping (runtime/process_memory.py in the Python runner says more).
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
#endif
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
