"""What ExecuTorch's error codes mean, so that a failed load or call says more than ``error: 0x:23``.

The codes are ``executorch::runtime::Error`` (runtime/core/error.h of executorch 1.5.1); the C++ runner has the
same table (examples/parakeet/runner/et_errors.cpp), and a test checks both against the installed header.
"""

from __future__ import annotations

import re

# code -> (name in error.h, what it means for someone running a .pte)
ERROR_CODES: dict[int, tuple[str, str]] = {
    0x00: ("Ok", "success"),
    0x01: ("Internal", "an internal error of the runtime"),
    0x02: ("InvalidState", "the runtime is in a state that does not allow the operation"),
    0x03: ("EndOfMethod", "the method has no more instructions to run"),
    0x04: ("AlreadyLoaded", "the resource is already loaded"),
    0x10: ("NotSupported", "an operation this runtime build does not support"),
    0x11: ("NotImplemented", "an operation this runtime does not implement"),
    0x12: ("InvalidArgument", "an invalid argument (for a method call, an input of the wrong shape, dtype or count)"),
    0x13: ("InvalidType", "a value of the wrong type"),
    0x14: ("OperatorMissing", "an operator the program uses is not registered (the runtime lacks its kernel library)"),
    0x15: ("RegistrationExceedingMaxKernels", "more kernels registered than the runtime has room for"),
    0x16: ("RegistrationAlreadyRegistered", "a kernel registered twice"),
    0x20: (
        "NotFound",
        "a method, backend or data entry the program names is missing (e.g. a delegate backend "
        "this runtime was built without)",
    ),
    0x21: ("MemoryAllocationFailed", "out of memory"),
    0x22: ("AccessFailed", "the file or its data could not be read"),
    0x23: (
        "InvalidProgram",
        "invalid program contents (a truncated or corrupt .pte, or one written by an incompatible ExecuTorch version)",
    ),
    0x24: ("InvalidExternalData", "invalid external weights (a .ptd that is damaged or belongs to another program)"),
    0x25: ("OutOfResources", "not enough resources for the operation"),
    0x30: (
        "DelegateInvalidCompatibility",
        "a delegate payload made for another version of its backend (re-export with this ExecuTorch version)",
    ),
    0x31: ("DelegateMemoryAllocationFailed", "a delegate backend ran out of memory"),
    0x32: ("DelegateInvalidHandle", "an invalid delegate handle"),
}

# The Python runtime's messages end in "error: 0x:23" (load_program, load_method) or "error: 0x12" (execute).
_CODE_IN_MESSAGE = re.compile(r"error:? 0x:?([0-9a-fA-F]+)")


def describe(code: int) -> str:
    """``ExecuTorch error 0x23 InvalidProgram: meaning``; unknown codes are named as such."""
    name, meaning = ERROR_CODES.get(code, ("Unknown", "a code this table does not know"))
    return f"ExecuTorch error 0x{code:02x} {name}: {meaning}"


def explain(message: str, runtime_log: str = "") -> str:
    """The runtime's exception text with its error code spelled out, and the runtime's last log line appended.

    Args:
        message: ``str()`` of the exception ExecuTorch's Python runtime raised.
        runtime_log: the runtime's last log line (its detail, e.g. "File size is too small..."), or "".
    Returns:
        ``describe(code)`` when the message holds a code, else the message itself; then ``; runtime says: <log
        line>`` when there is one.
    """
    match = _CODE_IN_MESSAGE.search(message)
    text = describe(int(match.group(1), 16)) if match else " ".join(message.split())
    return f"{text}; runtime says: {runtime_log}" if runtime_log else text
