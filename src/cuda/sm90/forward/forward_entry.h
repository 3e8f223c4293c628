// Hopper backend of dualkv::forward (compiled only when the build has sm_90a kernels): the calls
// it covers and the launch; its work plan comes from the layout's plan cache, so it needs no
// workspace. Arguments are validated by the caller.
#pragma once

#include <cstddef>

#include "dualkv/layout.h"
#include "dualkv/params.h"

namespace dualkv::detail::sm90 {

// Whether a Hopper forward kernel is compiled for the call's dtype and head_dim.
bool forward_covers(const ForwardParams& params);

// Whether that kernel fits the shared memory per block the call allows (options.max_shared_memory_per_block).
bool forward_fits(const ForwardParams& params);

void forward(const Layout& layout, const ForwardParams& params);

}  // namespace dualkv::detail::sm90
