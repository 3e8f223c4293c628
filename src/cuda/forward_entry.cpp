// CUDA backend of dualkv::forward: CUDA-only argument checks, the kernel family
// (ExecutionOptions::kernel_family), and for the portable family the tile shape (the fastest
// compiled one that fits the shared memory a block may use), the work plan from the layout's cache
// (built and uploaded by the layout's first call) and dispatch to the compiled (dtype, tile shape)
// sm80 kernel. The Hopper family has its own entry (sm90/forward/forward_entry).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <string>

#include "cuda/common/argument_checks.h"
#include "cuda/common/device_guard.h"
#include "cuda/common/device_plan.h"
#include "cuda/common/kernel_family.h"
#include "cuda/common/shared_memory_limit.h"
#include "cuda/common/softmax_math.h"
#include "cuda/sm80/forward/forward_launch.h"
#include "cuda/sm80/forward/tile_shape.h"
#ifdef DUALKV_WITH_SM90
#include "cuda/sm90/forward/forward_entry.h"
#endif
#include "dualkv/errors.h"
#include "host/backend.h"

namespace dualkv::detail {
namespace {

static_assert(sm80::lists_head_dims_of(kSm80ForwardHeadDims, sm80::kForwardTileShapes));

void check_compiled(const ForwardParams& params) {
  check_compiled_dtype(params.q.dtype, "q.dtype");
  check_compiled_head_dim(params.q.head_dim, kSm80ForwardHeadDims, "q.head_dim");
}

// The first compiled shape of q.head_dim that fits the device's shared memory per block (or
// options.max_shared_memory_per_block): at head_dim 256, 128-query tiles on A100 and Hopper and
// 64-query tiles on sm_86/sm_89.
const sm80::ForwardTileShape& tile_shape_for(const ForwardParams& params) {
  const SharedMemoryLimit limit = shared_memory_limit(params.options, params.q.device.index);
  return sm80::select_forward_tile_shape(params.q.head_dim, limit.bytes, limit.argument);
}

template <DType kDType>
void launch_for_tile_shape(const sm80::ForwardTileShape& shape, const ForwardKernelParams& kernel_params,
                           int32_t work_items, cudaStream_t stream) {
  sm80::visit_tile_shape<sm80::kForwardTileShapes>(shape, [&](auto index) {
    constexpr sm80::ForwardTileShape kShape = sm80::kForwardTileShapes[index];
    launch_sm80_forward<kDType, kShape.head_dim, kShape.block_m, kShape.block_n>(kernel_params, work_items, stream);
  });
}

// Whether the call runs the Hopper kernels (a forced family the build or device lacks throws).
// kAuto also needs the kernel to fit options.max_shared_memory_per_block; a forced kHopper that
// does not fit is reported by the Hopper entry, naming that option.
bool runs_hopper(const ForwardParams& params) {
#ifdef DUALKV_WITH_SM90
  const bool covered = sm90::forward_covers(params) &&
                       (params.options.kernel_family != KernelFamily::kAuto || sm90::forward_fits(params));
#else
  const bool covered = false;
#endif
  return resolve_kernel_family(params.options.kernel_family, params.q.device.index, covered) == KernelFamily::kHopper;
}

}  // namespace

// The forward's only device data besides the tensors is its plan, kept with the layout: no
// workspace for either family.
size_t cuda_forward_workspace_bytes(const Layout& /*layout*/, const ForwardParams& params) {
  check_cuda_accumulation(params.options.accumulation);
  if (!runs_hopper(params)) check_compiled(params);
  return 0;
}

void cuda_forward(const Layout& layout, const ForwardParams& p) {
  check_cuda_accumulation(p.options.accumulation);
  check_device_pointer(p.q.data, p.q.device, "q");
  check_device_pointer(p.k.data, p.k.device, "k");
  check_device_pointer(p.v.data, p.v.device, "v");
  check_device_pointer(p.out.data, p.out.device, "out");
  check_device_pointer(p.lse.data, p.lse.device, "lse");
  check_vector_aligned(p.q, "q");
  check_vector_aligned(p.k, "k");
  check_vector_aligned(p.v, "v");
  check_vector_aligned(p.out, "out");
#ifdef DUALKV_WITH_SM90
  if (runs_hopper(p)) return sm90::forward(layout, p);
#else
  runs_hopper(p);  // a forced kHopper is an Error in a build without it
#endif
  check_compiled(p);
  const int device = p.q.device.index;

  const sm80::ForwardTileShape& shape = tile_shape_for(p);
  DeviceGuard guard(device);
  const DeviceQueryPlan plan = device_query_plan(layout, shape.block_m, device, p.options);
  const int64_t work_items = plan.num_tiles * p.q.heads;
  if (work_items > std::numeric_limits<int32_t>::max()) {
    throw Error("layout", "query tiles (" + std::to_string(plan.num_tiles) + ") x q.heads (" +
                              std::to_string(p.q.heads) + ") exceed one CUDA launch (2^31 - 1 CTAs)");
  }

  ForwardKernelParams k{};
  k.q = p.q.data;
  k.k = p.k.data;
  k.v = p.v.data;
  k.out = p.out.data;
  k.lse = p.lse.data;
  k.q_token_stride = p.q.token_stride;
  k.q_head_stride = p.q.head_stride;
  k.k_token_stride = p.k.token_stride;
  k.k_head_stride = p.k.head_stride;
  k.v_token_stride = p.v.token_stride;
  k.v_head_stride = p.v.head_stride;
  k.out_token_stride = p.out.token_stride;
  k.out_head_stride = p.out.head_stride;
  k.lse_head_stride = p.lse.head_stride;
  k.tiles = plan.tiles;
  k.ranges = plan.ranges;
  k.heads = static_cast<int32_t>(p.q.heads);
  k.heads_per_kv_head = static_cast<int32_t>(p.q.heads / p.k.heads);
  k.softmax_scale = p.softmax_scale;
  k.softmax_scale_log2 = p.softmax_scale * kLog2E;

  const auto stream = static_cast<cudaStream_t>(p.options.stream);
  const auto items = static_cast<int32_t>(work_items);
  if (p.q.dtype == DType::kFloat16) {
    launch_for_tile_shape<DType::kFloat16>(shape, k, items, stream);
  } else {
    launch_for_tile_shape<DType::kBFloat16>(shape, k, items, stream);
  }
}

}  // namespace dualkv::detail
