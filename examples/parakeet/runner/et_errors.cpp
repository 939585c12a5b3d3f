#include "et_errors.h"

#include <cstdint>
#include <cstdio>

namespace parakeet {
namespace {

struct ErrorInfo {
  uint32_t code;
  const char* name;
  const char* meaning;
};

// executorch::runtime::Error of executorch 1.5.1, in runtime/core/error.h's order.
constexpr ErrorInfo kErrors[] = {
    {0x00, "Ok", "success"},
    {0x01, "Internal", "an internal error of the runtime"},
    {0x02, "InvalidState", "the runtime is in a state that does not allow the operation"},
    {0x03, "EndOfMethod", "the method has no more instructions to run"},
    {0x04, "AlreadyLoaded", "the resource is already loaded"},
    {0x10, "NotSupported", "an operation this runtime build does not support"},
    {0x11, "NotImplemented", "an operation this runtime does not implement"},
    {0x12, "InvalidArgument", "an invalid argument (for a method call, an input of the wrong shape, dtype or count)"},
    {0x13, "InvalidType", "a value of the wrong type"},
    {0x14, "OperatorMissing", "an operator the program uses is not registered (the runtime lacks its kernel library)"},
    {0x15, "RegistrationExceedingMaxKernels", "more kernels registered than the runtime has room for"},
    {0x16, "RegistrationAlreadyRegistered", "a kernel registered twice"},
    {0x20, "NotFound",
     "a method, backend or data entry the program names is missing (e.g. a delegate backend this runtime was built "
     "without)"},
    {0x21, "MemoryAllocationFailed", "out of memory"},
    {0x22, "AccessFailed", "the file or its data could not be read"},
    {0x23, "InvalidProgram",
     "invalid program contents (a truncated or corrupt .pte, or one written by an incompatible ExecuTorch version)"},
    {0x24, "InvalidExternalData", "invalid external weights (a .ptd that is damaged or belongs to another program)"},
    {0x25, "OutOfResources", "not enough resources for the operation"},
    {0x30, "DelegateInvalidCompatibility",
     "a delegate payload made for another version of its backend (re-export with this ExecuTorch version)"},
    {0x31, "DelegateMemoryAllocationFailed", "a delegate backend ran out of memory"},
    {0x32, "DelegateInvalidHandle", "an invalid delegate handle"},
};

}  // namespace

std::string describe_error(executorch::runtime::Error error) {
  const auto code = static_cast<uint32_t>(error);
  const char* name = "Unknown";
  const char* meaning = "a code this table does not know";
  for (const auto& e : kErrors) {
    if (e.code == code) {
      name = e.name;
      meaning = e.meaning;
    }
  }
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%02x", code);
  return std::string("ExecuTorch error ") + hex + " " + name + ": " + meaning;
}

std::string printable_log_line(const char* message, size_t length) {
  while (length > 0 && (message[length - 1] == '\n' || message[length - 1] == '\r')) --length;
  std::string out;
  out.reserve(length);
  for (size_t i = 0; i < length; ++i) {
    const auto c = static_cast<unsigned char>(message[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

}  // namespace parakeet
