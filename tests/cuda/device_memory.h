// Owning device allocations for the GPU suite, and CUDA status checks that fail loudly.
//
// The suite talks to the library through the public API only; this is the little CUDA runtime
// plumbing the tests themselves need (inputs up, results down, reference kernels' scratch, streams).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace dualkv_test {

inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorName(status) + " (" +
                             cudaGetErrorString(status) + ")");
  }
}

// One cudaMalloc allocation of exactly `bytes` bytes (no rounding up, so that
// compute-sanitizer memcheck flags any access past the end of a tensor).
class DeviceBytes {
 public:
  explicit DeviceBytes(size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) check_cuda(cudaMalloc(&data_, bytes_), "cudaMalloc");
  }
  ~DeviceBytes() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

  // Returns once the bytes are on the device. cudaMemcpy from pageable memory may return while its
  // DMA is still in flight, and the library runs on non-blocking streams that do not wait for it:
  // a poisoned output uploaded last could otherwise land over what a kernel had just written.
  void upload(const void* host) {
    check_cuda(cudaMemcpy(data_, host, bytes_, cudaMemcpyHostToDevice), "upload");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after an upload");
  }
  void download(void* host) const { check_cuda(cudaMemcpy(host, data_, bytes_, cudaMemcpyDeviceToHost), "download"); }

 private:
  size_t bytes_ = 0;
  void* data_ = nullptr;
};

// A non-blocking stream of its own, so that a call's work is ordered only by what it asks for.
class Stream {
 public:
  Stream() { check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace dualkv_test
