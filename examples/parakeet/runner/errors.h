// Error types of the runner, one per stage as in the Python runner (AudioError, TokenizerError, PteModelError),
// so the command line can print one line and exit non-zero for any of them instead of crashing.
#pragma once

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

}  // namespace parakeet
