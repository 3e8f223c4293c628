#include "cuda/common/kernel_family.h"

#include <cuda_runtime_api.h>

#include <string>

#include "cuda/common/cuda_check.h"
#include "dualkv/errors.h"

namespace dualkv::detail {
namespace {

bool is_hopper(int device) {
  int major = 0, minor = 0;
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
             "cudaDeviceGetAttribute(cudaDevAttrComputeCapabilityMajor)");
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device),
             "cudaDeviceGetAttribute(cudaDevAttrComputeCapabilityMinor)");
  return major == 9 && minor == 0;
}

}  // namespace

KernelFamily resolve_kernel_family(KernelFamily requested, int device, bool hopper_covers_call) {
  switch (requested) {
    case KernelFamily::kPortable:
      return KernelFamily::kPortable;
    case KernelFamily::kHopper:
      if (!kHopperCompiled) {
        throw Error("options.kernel_family",
                    "kHopper asked for, but this build has no Hopper kernels (build with CUDA architecture 90)");
      }
      if (!is_hopper(device)) {
        throw Error("options.kernel_family", "kHopper needs a compute capability 9.0 GPU (H100/H200); device " +
                                                 std::to_string(device) + " is not one");
      }
      if (!hopper_covers_call) {
        throw Error("options.kernel_family", "kHopper has no kernel for this call's dtype and head_dim");
      }
      return KernelFamily::kHopper;
    case KernelFamily::kAuto:
      return kHopperCompiled && hopper_covers_call && is_hopper(device) ? KernelFamily::kHopper
                                                                        : KernelFamily::kPortable;
  }
  throw Error("options.kernel_family", "must be kAuto, kPortable or kHopper");
}

}  // namespace dualkv::detail
