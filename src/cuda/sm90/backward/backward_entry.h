// Hopper backend of dualkv::backward (compiled only when the build has sm_90a kernels): the calls
// it covers, the tile sizes its plan and workspace are built for, and the launch. The generic
// entry (src/cuda/backward_entry.cpp) validates the arguments, plans the workspace and fills the
// portable kernel parameters; this adds the TMA descriptors.
#pragma once

#include <cstddef>

#include "cuda/common/backward_kernel_params.h"
#include "dualkv/params.h"

namespace dualkv::detail::sm90 {

// Whether a Hopper backward kernel is compiled for the call's dtype and head_dim.
bool backward_covers(const BackwardParams& params);

// Whether that kernel fits the shared memory per block the call allows
// (options.max_shared_memory_per_block).
bool backward_fits(const BackwardParams& params);

// Tile sizes of the host plan: key tiles of key_block keys walked in query steps of query_block,
// and (deterministic mode) query tiles of dq_query_block for the dQ kernel, else 0; whether the
// kernel paces its walks (walk_pacing.h: then the workspace holds a progress slot per CTA).
struct BackwardBlocks {
  int key_block;
  int query_block;
  int dq_query_block;
  bool paces_walks;
};
BackwardBlocks backward_blocks(const BackwardParams& params);

// Runs the backward; `kernel_params` holds the plan, workspace and tensor views of the call
// (workspace planned with stores_lse_log2).
void backward(const BackwardParams& params, const BackwardKernelParams& kernel_params);

}  // namespace dualkv::detail::sm90
