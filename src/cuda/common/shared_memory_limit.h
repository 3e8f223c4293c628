// The shared memory per block a kernel of one call may use: the device's opt-in limit, lowered by
// ExecutionOptions::max_shared_memory_per_block where the caller set it.
#pragma once

#include <cstddef>

#include "dualkv/params.h"

namespace dualkv::detail {

struct SharedMemoryLimit {
  size_t bytes;
  // The argument an Error names when a kernel does not fit: the option if it set the limit;
  // otherwise q.head_dim, since the head dim is what sizes the kernels past the device's limit.
  const char* argument;
};

SharedMemoryLimit shared_memory_limit(const ExecutionOptions& options, int device);

// Error naming limit.argument if `needed_bytes` exceed the limit; `what` names the kernel.
void check_fits_shared_memory(size_t needed_bytes, const SharedMemoryLimit& limit, const char* what);

}  // namespace dualkv::detail
