// CUDA runtime failures become dualkv::RuntimeError carrying the runtime's own error string.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "dualkv/errors.h"

namespace dualkv::detail {

inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw RuntimeError(std::string(what) + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) +
                       ")");
  }
}

// A bad launch configuration is reported by the next runtime call, not by the <<<>>> itself.
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

}  // namespace dualkv::detail
