#include "host/device_checks.h"

#include "dualkv/errors.h"

namespace dualkv::detail {

std::string device_name(Device device) {
  return device.kind == DeviceKind::kCpu ? std::string("cpu") : "cuda:" + std::to_string(device.index);
}

void check_device(const std::string& name, Device device) {
  const std::string argument = name + ".device";
  if (device.kind == DeviceKind::kCuda) {
#ifndef DUALKV_WITH_CUDA
    throw Error(argument, "CUDA tensors need a dualkv build with DUALKV_ENABLE_CUDA=ON");
#endif
    if (device.index < 0) throw Error(argument, "CUDA device index must be >= 0");
  } else if (device.index != 0) {
    throw Error(argument, "CPU device index must be 0");
  }
}

}  // namespace dualkv::detail
