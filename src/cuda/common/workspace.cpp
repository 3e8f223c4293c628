#include "cuda/common/workspace.h"

#include <cstdint>
#include <string>

#include "cuda/common/argument_checks.h"
#include "dualkv/errors.h"

namespace dualkv::detail {

void* aligned_workspace(const ExecutionOptions& options, int device_index, size_t payload_bytes) {
  const size_t needed = workspace_bytes_for(payload_bytes);
  if (options.workspace == nullptr || options.workspace_bytes < needed) {
    throw Error("options.workspace_bytes",
                "must be at least " + std::to_string(needed) + " (see *_workspace_bytes()), got " +
                    std::to_string(options.workspace == nullptr ? 0 : options.workspace_bytes));
  }
  check_device_pointer(options.workspace, Device{DeviceKind::kCuda, device_index}, "options.workspace");
  const uintptr_t start = reinterpret_cast<uintptr_t>(options.workspace);
  const uintptr_t aligned = (start + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
  return reinterpret_cast<void*>(aligned);
}

}  // namespace dualkv::detail
