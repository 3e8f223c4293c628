#include "memory_high_water.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dualkv::bench {
namespace {

size_t free_device_bytes() {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  const cudaError_t status = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (status != cudaSuccess) throw std::runtime_error(std::string("cudaMemGetInfo: ") + cudaGetErrorString(status));
  return free_bytes;
}

}  // namespace

MemoryHighWater::MemoryHighWater() : baseline_free_(free_device_bytes()), lowest_free_(baseline_free_) {}

void MemoryHighWater::sample() { lowest_free_ = std::min(lowest_free_, free_device_bytes()); }

}  // namespace dualkv::bench
