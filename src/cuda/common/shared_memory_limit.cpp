#include "cuda/common/shared_memory_limit.h"

#include <cuda_runtime_api.h>

#include <string>

#include "cuda/common/cuda_check.h"
#include "dualkv/errors.h"

namespace dualkv::detail {

SharedMemoryLimit shared_memory_limit(const ExecutionOptions& options, int device) {
  int device_limit = 0;
  check_cuda(cudaDeviceGetAttribute(&device_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute(cudaDevAttrMaxSharedMemoryPerBlockOptin)");
  const auto device_bytes = static_cast<size_t>(device_limit);
  const size_t requested = options.max_shared_memory_per_block;
  if (requested != 0 && requested < device_bytes) return {requested, "options.max_shared_memory_per_block"};
  return {device_bytes, "q.head_dim"};
}

void check_fits_shared_memory(size_t needed_bytes, const SharedMemoryLimit& limit, const char* what) {
  if (needed_bytes > limit.bytes) {
    throw Error(limit.argument, std::string(what) + " needs " + std::to_string(needed_bytes) +
                                    " bytes of shared memory per block; the limit is " + std::to_string(limit.bytes));
  }
}

}  // namespace dualkv::detail
