// Device rules shared by the validators of every public call.
#pragma once

#include <string>

#include "dualkv/tensor.h"

namespace dualkv::detail {

// "cpu" or "cuda:<index>", as error messages name devices.
std::string device_name(Device device);

// `name`.device must be a device this build can run on: a CUDA device only in a CUDA build, with
// an index >= 0; the CPU with index 0.
void check_device(const std::string& name, Device device);

}  // namespace dualkv::detail
