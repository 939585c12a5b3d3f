// What ExecuTorch's error codes mean, so that a failed load or call says more than "Error::InvalidProgram".
// Same table and wording as runtime/et_errors.py (a test checks both against executorch's runtime/core/error.h).
#pragma once

#include <executorch/runtime/core/error.h>

#include <cstddef>
#include <string>

namespace parakeet {

// "ExecuTorch error 0x23 InvalidProgram: invalid program contents (a truncated or corrupt .pte, ...)".
std::string describe_error(executorch::runtime::Error error);

// One line of the runtime's log as text that prints anywhere: trailing newlines dropped, and every byte outside
// printable ASCII written as \xHH (the runtime quotes what it read, e.g. a damaged file's identifier bytes).
std::string printable_log_line(const char* message, size_t length);

}  // namespace parakeet
