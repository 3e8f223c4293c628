// The caller's device workspace (per-call scratch): sizing and checking it. Regions start on
// kWorkspaceAlignment boundaries whatever pointer the caller hands in, which is why every size
// carries kWorkspaceAlignment bytes of slack.
#pragma once

#include <cstddef>

#include "dualkv/params.h"

namespace dualkv::detail {

constexpr size_t kWorkspaceAlignment = 256;

// Workspace bytes to ask the caller for, for `payload_bytes` of aligned data.
constexpr size_t workspace_bytes_for(size_t payload_bytes) { return payload_bytes + kWorkspaceAlignment; }

// The aligned start of the caller's workspace. Error "options.workspace_bytes" if it cannot hold
// `payload_bytes` after alignment, "options.workspace" if it is null or not device memory of
// `device_index`.
void* aligned_workspace(const ExecutionOptions& options, int device_index, size_t payload_bytes);

}  // namespace dualkv::detail
