#include "xnnpack_options.h"

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/backend/options.h>

namespace parakeet {

executorch::runtime::Error share_xnnpack_weights_and_workspace() {
  executorch::runtime::BackendOptions<2> options;
  options.set_option("weight_cache_enabled", true);
  options.set_option("workspace_sharing_mode", 2);  // WorkspaceSharingMode::Global
  const executorch::runtime::Error e = executorch::runtime::set_option("XnnpackBackend", options.view());
  return e == executorch::runtime::Error::NotFound ? executorch::runtime::Error::Ok : e;
}

}  // namespace parakeet
