// dualkv public API: shared-prompt attention over the packed layout of layout.h.
#pragma once

#include <cmath>
#include <cstddef>

#include "dualkv/errors.h"
#include "dualkv/layout.h"
#include "dualkv/params.h"
#include "dualkv/tensor.h"
#include "dualkv/token_scores.h"

namespace dualkv {

inline float default_softmax_scale(int64_t head_dim) { return 1.0f / std::sqrt(static_cast<float>(head_dim)); }

// Validate everything (docs/decisions.md, "Errors and validation"), then run on the device the tensors live on.
// Throws dualkv::Error on bad input before touching any output, dualkv::RuntimeError on a
// device failure. Inputs are never modified.
void forward(const Layout& layout, const ForwardParams& params);
void backward(const Layout& layout, const BackwardParams& params);

// Device scratch the CUDA path needs (0 on the CPU). Validates like forward()/backward().
size_t forward_workspace_bytes(const Layout& layout, const ForwardParams& params);
size_t backward_workspace_bytes(const Layout& layout, const BackwardParams& params);

// Whether this build contains the CUDA kernels.
bool cuda_compiled();

}  // namespace dualkv
