#include "common/device_buffer.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "host/float16.h"

#ifdef DUALKV_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace dualkv::tools {
namespace {

#ifdef DUALKV_WITH_CUDA
void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}
#endif

std::vector<unsigned char> encode(const std::vector<float>& values, DType dtype) {
  std::vector<unsigned char> bytes(values.size() * dtype_size(dtype));
  if (dtype == DType::kFloat32) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }
  auto* half = reinterpret_cast<uint16_t*>(bytes.data());
  for (size_t i = 0; i < values.size(); ++i) {
    half[i] = dtype == DType::kFloat16 ? detail::float_to_fp16(values[i]) : detail::float_to_bf16(values[i]);
  }
  return bytes;
}

std::vector<float> decode(const std::vector<unsigned char>& bytes, DType dtype) {
  std::vector<float> values(bytes.size() / dtype_size(dtype));
  if (dtype == DType::kFloat32) {
    std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
  }
  const auto* half = reinterpret_cast<const uint16_t*>(bytes.data());
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = dtype == DType::kFloat16 ? detail::fp16_to_float(half[i]) : detail::bf16_to_float(half[i]);
  }
  return values;
}

}  // namespace

bool cuda_device_available() {
#ifdef DUALKV_WITH_CUDA
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
#else
  return false;
#endif
}

DeviceBuffer::DeviceBuffer(Device device, DType dtype, size_t elements)
    : device_(device), dtype_(dtype), elements_(elements) {
  const size_t bytes = elements * dtype_size(dtype);
  if (device.kind == DeviceKind::kCpu) {
    data_ = ::operator new(bytes);
    return;
  }
#ifdef DUALKV_WITH_CUDA
  check_cuda(cudaMalloc(&data_, bytes), "cudaMalloc");
#else
  throw std::runtime_error("this build has no CUDA support");
#endif
}

DeviceBuffer::~DeviceBuffer() {
  if (device_.kind == DeviceKind::kCpu) {
    ::operator delete(data_);
    return;
  }
#ifdef DUALKV_WITH_CUDA
  cudaFree(data_);
#endif
}

void DeviceBuffer::upload(const std::vector<float>& values) {
  if (values.size() != elements_) throw std::invalid_argument("upload: size mismatch");
  const std::vector<unsigned char> bytes = encode(values, dtype_);
  if (device_.kind == DeviceKind::kCpu) {
    std::memcpy(data_, bytes.data(), bytes.size());
    return;
  }
#ifdef DUALKV_WITH_CUDA
  check_cuda(cudaMemcpy(data_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
#endif
}

std::vector<float> DeviceBuffer::download() const {
  std::vector<unsigned char> bytes(elements_ * dtype_size(dtype_));
  if (device_.kind == DeviceKind::kCpu) {
    std::memcpy(bytes.data(), data_, bytes.size());
  } else {
#ifdef DUALKV_WITH_CUDA
    check_cuda(cudaMemcpy(bytes.data(), data_, bytes.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
#endif
  }
  return decode(bytes, dtype_);
}

void DeviceBuffer::poison() { upload(std::vector<float>(elements_, std::numeric_limits<float>::quiet_NaN())); }

RegionTimer::RegionTimer(Device device) : device_(device) {
#ifdef DUALKV_WITH_CUDA
  if (device.kind == DeviceKind::kCuda) {
    check_cuda(cudaEventCreate(reinterpret_cast<cudaEvent_t*>(&start_event_)), "cudaEventCreate");
    check_cuda(cudaEventCreate(reinterpret_cast<cudaEvent_t*>(&stop_event_)), "cudaEventCreate");
  }
#endif
}

RegionTimer::~RegionTimer() {
#ifdef DUALKV_WITH_CUDA
  if (device_.kind == DeviceKind::kCuda) {
    cudaEventDestroy(static_cast<cudaEvent_t>(start_event_));
    cudaEventDestroy(static_cast<cudaEvent_t>(stop_event_));
  }
#endif
}

void RegionTimer::start() {
#ifdef DUALKV_WITH_CUDA
  if (device_.kind == DeviceKind::kCuda) {
    check_cuda(cudaEventRecord(static_cast<cudaEvent_t>(start_event_)), "cudaEventRecord");
    return;
  }
#endif
  start_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double RegionTimer::stop_ms() {
#ifdef DUALKV_WITH_CUDA
  if (device_.kind == DeviceKind::kCuda) {
    check_cuda(cudaEventRecord(static_cast<cudaEvent_t>(stop_event_)), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_event_)), "cudaEventSynchronize");
    check_cuda(cudaGetLastError(), "kernel launch");
    float ms = 0.0f;
    check_cuda(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_event_), static_cast<cudaEvent_t>(stop_event_)),
               "cudaEventElapsedTime");
    return ms;
  }
#endif
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return (now - start_seconds_) * 1e3;
}

Workspace::Workspace(Device device, size_t size) : bytes(size) {
  if (size == 0) return;
#ifdef DUALKV_WITH_CUDA
  if (device.kind == DeviceKind::kCuda) check_cuda(cudaMalloc(&data, size), "cudaMalloc(workspace)");
#else
  (void)device;
#endif
}

Workspace::~Workspace() {
#ifdef DUALKV_WITH_CUDA
  if (data != nullptr) cudaFree(data);
#endif
}

}  // namespace dualkv::tools
