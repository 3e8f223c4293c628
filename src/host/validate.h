// Host validation of every public call. Throws dualkv::Error naming the
// argument and the rule; runs before any output is touched.
#pragma once

#include "dualkv/layout.h"
#include "dualkv/params.h"

namespace dualkv::detail {

void validate_forward(const Layout& layout, const ForwardParams& params);
void validate_backward(const Layout& layout, const BackwardParams& params);

}  // namespace dualkv::detail
