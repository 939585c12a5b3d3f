// The XNNPACK delegate's options both runtimes of this repository set before loading a program (the C++ runner's
// PteModel and the Python runner's native runtime, capi/).
#pragma once

#include <executorch/runtime/core/error.h>

namespace parakeet {

// One packed copy of each constant weight for all XNNPACK delegates (the weight cache; off in the executorch
// wheel's build) and one workspace for all of them (already the wheel's default, set so that a runtime built
// otherwise behaves the same); at v3's size, fpa4w and a 60 s bound the weight cache takes peak RSS down by ~20 MiB.
// Call it before any method is loaded: the options apply to delegates initialised afterwards. A runtime without the
// XNNPACK backend (Metal, CUDA builds) has nothing to share, so its NotFound is returned as Ok.
executorch::runtime::Error share_xnnpack_weights_and_workspace();

}  // namespace parakeet
