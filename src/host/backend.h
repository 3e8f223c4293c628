// The interface between host dispatch and the compute backends.
//
// Host code (this layer) validates and then calls these; the CPU layer (src/cpu) and the CUDA
// layer (src/cuda) implement them. Backends may assume fully validated parameters.
#pragma once

#include <cstddef>

#include "dualkv/layout.h"
#include "dualkv/params.h"
#include "dualkv/token_scores.h"

namespace dualkv::detail {

void cpu_forward(const Layout& layout, const ForwardParams& params);
void cpu_backward(const Layout& layout, const BackwardParams& params);
// Throws dualkv::Error for uses whose contents break TokenUses' rules, before writing.
void cpu_token_scores_forward(const TokenScoresForwardParams& params);
void cpu_token_scores_backward(const TokenScoresBackwardParams& params);

#ifdef DUALKV_WITH_CUDA
// Each throws dualkv::Error for a configuration that is not compiled in (dtype, head_dim).
size_t cuda_forward_workspace_bytes(const Layout& layout, const ForwardParams& params);
size_t cuda_backward_workspace_bytes(const Layout& layout, const BackwardParams& params);
void cuda_forward(const Layout& layout, const ForwardParams& params);
void cuda_backward(const Layout& layout, const BackwardParams& params);
void cuda_token_scores_forward(const TokenScoresForwardParams& params);
void cuda_token_scores_backward(const TokenScoresBackwardParams& params);
#endif

}  // namespace dualkv::detail
