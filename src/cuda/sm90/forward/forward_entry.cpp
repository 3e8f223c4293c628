#include "cuda/sm90/forward/forward_entry.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>
#include <string>

#include "cuda/common/cuda_check.h"
#include "cuda/common/device_guard.h"
#include "cuda/common/device_plan.h"
#include "cuda/common/shared_memory_limit.h"
#include "cuda/common/softmax_math.h"
#include "cuda/common/tensor_map.h"
#include "cuda/sm90/forward/launch.h"
#include "cuda/sm90/forward/tile_shape.h"
#include "dualkv/errors.h"

namespace dualkv::detail::sm90 {
namespace {

const ForwardTileShape& shape_of(const ForwardParams& params) { return *find_forward_tile_shape(params.q.head_dim); }

template <DType kDType>
struct HeadDimDispatch {
  static size_t shared_memory_bytes(int64_t head_dim) {
    switch (head_dim) {
      case 64:
        return forward_shared_memory_bytes<kDType, 64>();
      case 128:
        return forward_shared_memory_bytes<kDType, 128>();
      default:
        return forward_shared_memory_bytes<kDType, 256>();
    }
  }
  static void launch(int64_t head_dim, const ForwardKernelParams& params, int ctas, cudaStream_t stream) {
    switch (head_dim) {
      case 64:
        return launch_forward<kDType, 64>(params, ctas, stream);
      case 128:
        return launch_forward<kDType, 128>(params, ctas, stream);
      default:
        return launch_forward<kDType, 256>(params, ctas, stream);
    }
  }
};

size_t shared_memory_bytes(const ForwardParams& p) {
  return p.q.dtype == DType::kFloat16 ? HeadDimDispatch<DType::kFloat16>::shared_memory_bytes(p.q.head_dim)
                                      : HeadDimDispatch<DType::kBFloat16>::shared_memory_bytes(p.q.head_dim);
}

}  // namespace

bool forward_covers(const ForwardParams& params) {
  static_assert(sizeof(kForwardTileShapes) / sizeof(kForwardTileShapes[0]) == 3,
                "add the new head_dim to HeadDimDispatch");
  return (params.q.dtype == DType::kFloat16 || params.q.dtype == DType::kBFloat16) &&
         find_forward_tile_shape(params.q.head_dim) != nullptr;
}

bool forward_fits(const ForwardParams& params) {
  return shared_memory_bytes(params) <= shared_memory_limit(params.options, params.q.device.index).bytes;
}

void forward(const Layout& layout, const ForwardParams& p) {
  const int device = p.q.device.index;
  const ForwardTileShape& shape = shape_of(p);
  check_fits_shared_memory(shared_memory_bytes(p), shared_memory_limit(p.options, device), "the Hopper forward");

  DeviceGuard guard(device);
  const DeviceQueryPlan plan = device_query_plan(layout, shape.block_m, device, p.options);
  const int64_t work_items = plan.num_tiles * p.q.heads;
  if (work_items > std::numeric_limits<int32_t>::max()) {
    throw Error("layout", "query tiles (" + std::to_string(plan.num_tiles) + ") x q.heads (" +
                              std::to_string(p.q.heads) + ") exceed the kernel's int32 work-item index");
  }

  ForwardKernelParams k{};
  k.q_map = make_token_head_tensor_map(p.q, 64, shape.block_m, "q");
  k.k_map = make_token_head_tensor_map(p.k, 64, shape.block_n, "k");
  k.v_map = make_token_head_tensor_map(p.v, 64, shape.block_n, "v");
  k.out = p.out.data;
  k.lse = p.lse.data;
  k.out_token_stride = p.out.token_stride;
  k.out_head_stride = p.out.head_stride;
  k.lse_head_stride = p.lse.head_stride;
  k.tiles = plan.tiles;
  k.ranges = plan.ranges;
  k.num_tiles = static_cast<int32_t>(plan.num_tiles);
  k.heads = static_cast<int32_t>(p.q.heads);
  k.heads_per_kv_head = static_cast<int32_t>(p.q.heads / p.k.heads);
  k.softmax_scale = p.softmax_scale;
  k.softmax_scale_log2 = p.softmax_scale * kLog2E;

  int multiprocessors = 0;
  check_cuda(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device),
             "cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount)");
  const int ctas = static_cast<int>(std::min<int64_t>(multiprocessors, work_items));
  const auto stream = static_cast<cudaStream_t>(p.options.stream);
  if (p.q.dtype == DType::kFloat16) {
    HeadDimDispatch<DType::kFloat16>::launch(p.q.head_dim, k, ctas, stream);
  } else {
    HeadDimDispatch<DType::kBFloat16>::launch(p.q.head_dim, k, ctas, stream);
  }
}

}  // namespace dualkv::detail::sm90
