// Typed storage on the CPU or a CUDA device, filled from and read back to float.
#pragma once

#include <cstddef>
#include <vector>

#include "dualkv/tensor.h"

namespace dualkv::tools {

// Whether this build has CUDA and the machine has a usable CUDA device.
bool cuda_device_available();

class DeviceBuffer {
 public:
  DeviceBuffer(Device device, DType dtype, size_t elements);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  DType dtype() const { return dtype_; }
  size_t elements() const { return elements_; }

  void upload(const std::vector<float>& values);  // converted to dtype
  std::vector<float> download() const;            // converted from dtype
  void poison();                                  // every element NaN, to catch unwritten outputs

 private:
  Device device_;
  DType dtype_;
  size_t elements_;
  void* data_ = nullptr;
};

// A wall-clock or CUDA-event timer for one region of device work.
class RegionTimer {
 public:
  explicit RegionTimer(Device device);
  ~RegionTimer();
  void start();
  double stop_ms();  // waits for the device

 private:
  Device device_;
  void* start_event_ = nullptr;
  void* stop_event_ = nullptr;
  double start_seconds_ = 0.0;
};

// Device scratch for the CUDA path (empty on the CPU).
struct Workspace {
  explicit Workspace(Device device, size_t bytes);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* data = nullptr;
  size_t bytes = 0;
};

}  // namespace dualkv::tools
