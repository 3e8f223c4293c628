// Makes a device current for one scope and restores the caller's device afterwards, so that a
// launch lands on the device the tensors live on without changing the caller's state.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/common/cuda_check.h"

namespace dualkv::detail {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    if (device != previous_) check_cuda(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace dualkv::detail
