// Error types of the runner, one per stage as in the Python runner (AudioError, TokenizerError, PteModelError),
// so the command line can print one line and exit non-zero for any of them instead of crashing; and the sink that
// receives warnings (audio.py's AudioWarning, tokenizer.py's TokenizerWarning), one line each.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

namespace parakeet {

struct RunnerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct AudioError : RunnerError {
  using RunnerError::RunnerError;
};
struct TokenizerError : RunnerError {
  using RunnerError::RunnerError;
};
struct PteModelError : RunnerError {
  using RunnerError::RunnerError;
};
struct AudioRangeError : PteModelError {
  using PteModelError::PteModelError;
};

// Receives one warning line (no trailing newline); an empty sink drops warnings.
using WarningSink = std::function<void(const std::string&)>;

}  // namespace parakeet
