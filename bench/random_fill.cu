// Counter-based uniform fill: element i gets splitmix64(seed, i), so any grid shape gives the
// same tensor. Warp roles, pipeline stages, shared memory: none (a grid-stride elementwise loop).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "random_fill.h"

namespace dualkv::bench {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocks = 4096;

__device__ float uniform_at(uint64_t seed, size_t index) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  // The top 24 bits as a fraction in [0, 1), mapped to [-1, 1).
  return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

template <typename T>
__global__ void fill_kernel(T* data, size_t elements, uint64_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < elements;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    if constexpr (std::is_same_v<T, __half>) {
      data[i] = __float2half_rn(uniform_at(seed, i));
    } else {
      data[i] = __float2bfloat16_rn(uniform_at(seed, i));
    }
  }
}

}  // namespace

void fill_uniform(void* data, DType dtype, size_t elements, uint64_t seed) {
  if (dtype == DType::kFloat16) {
    fill_kernel<<<kBlocks, kThreads>>>(static_cast<__half*>(data), elements, seed);
  } else if (dtype == DType::kBFloat16) {
    fill_kernel<<<kBlocks, kThreads>>>(static_cast<__nv_bfloat16*>(data), elements, seed);
  } else {
    throw std::invalid_argument("fill_uniform: the benchmark uses fp16 or bf16 only");
  }
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) throw std::runtime_error(std::string("fill_kernel: ") + cudaGetErrorString(status));
}

}  // namespace dualkv::bench
