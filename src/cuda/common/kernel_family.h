// Which CUDA kernel family runs a call (ExecutionOptions::kernel_family, params.h).
#pragma once

#include "dualkv/params.h"

namespace dualkv::detail {

// Whether this build holds the Hopper (sm_90a) kernels.
constexpr bool kHopperCompiled =
#ifdef DUALKV_WITH_SM90
    true;
#else
    false;
#endif

// The family for `requested` on CUDA device `device`. `hopper_covers_call`: the Hopper family has
// a kernel for the call's dtype and head_dim. kAuto picks Hopper when it is compiled, the device
// is compute capability 9.0 and it covers the call; a forced family that cannot run is an Error
// naming options.kernel_family.
KernelFamily resolve_kernel_family(KernelFamily requested, int device, bool hopper_covers_call);

}  // namespace dualkv::detail
