#include "cuda/sm90/forward/forward_entry.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cuda/common/cuda_check.h"
#include "cuda/common/device_guard.h"
#include "cuda/common/shared_memory_limit.h"
#include "cuda/common/softmax_constants.h"
#include "cuda/common/tensor_map.h"
#include "cuda/common/workspace.h"
#include "cuda/sm90/forward/launch.h"
#include "cuda/sm90/forward/tile_shape.h"
#include "dualkv/errors.h"
#include "host/query_plan.h"

namespace dualkv::detail::sm90 {
namespace {

constexpr size_t kRangesAlignment = 16;

const ForwardTileShape& shape_of(const ForwardParams& params) { return *find_forward_tile_shape(params.q.head_dim); }

size_t tiles_bytes(int64_t tiles) {
  const size_t bytes = static_cast<size_t>(tiles) * sizeof(QueryTile);
  return (bytes + kRangesAlignment - 1) / kRangesAlignment * kRangesAlignment;
}

size_t plan_bytes(const QueryPlanSize& size) {
  return tiles_bytes(size.tiles) + static_cast<size_t>(size.ranges) * sizeof(KeyRange);
}

template <DType kDType>
struct HeadDimDispatch {
  static size_t shared_memory_bytes(int64_t head_dim) {
    return head_dim == 64 ? forward_shared_memory_bytes<kDType, 64>() : forward_shared_memory_bytes<kDType, 128>();
  }
  static void launch(int64_t head_dim, const ForwardKernelParams& params, int ctas, cudaStream_t stream) {
    if (head_dim == 64) return launch_forward<kDType, 64>(params, ctas, stream);
    return launch_forward<kDType, 128>(params, ctas, stream);
  }
};

size_t shared_memory_bytes(const ForwardParams& p) {
  return p.q.dtype == DType::kFloat16 ? HeadDimDispatch<DType::kFloat16>::shared_memory_bytes(p.q.head_dim)
                                      : HeadDimDispatch<DType::kBFloat16>::shared_memory_bytes(p.q.head_dim);
}

}  // namespace

bool forward_covers(const ForwardParams& params) {
  static_assert(sizeof(kForwardTileShapes) / sizeof(kForwardTileShapes[0]) == 2,
                "add the new head_dim to HeadDimDispatch");
  return (params.q.dtype == DType::kFloat16 || params.q.dtype == DType::kBFloat16) &&
         find_forward_tile_shape(params.q.head_dim) != nullptr;
}

bool forward_fits(const ForwardParams& params) {
  return shared_memory_bytes(params) <= shared_memory_limit(params.options, params.q.device.index).bytes;
}

size_t forward_workspace_bytes(const Layout& layout, const ForwardParams& params) {
  return workspace_bytes_for(plan_bytes(query_plan_size(layout, shape_of(params).block_m)));
}

void forward(const Layout& layout, const ForwardParams& p) {
  const int device = p.q.device.index;
  const ForwardTileShape& shape = shape_of(p);
  check_fits_shared_memory(shared_memory_bytes(p), shared_memory_limit(p.options, device), "the Hopper forward");

  const QueryPlan plan = build_query_plan(layout, shape.block_m);
  const int64_t work_items = static_cast<int64_t>(plan.tiles.size()) * p.q.heads;
  if (work_items > std::numeric_limits<int32_t>::max()) {
    throw Error("layout", "query tiles (" + std::to_string(plan.tiles.size()) + ") x q.heads (" +
                              std::to_string(p.q.heads) + ") exceed the kernel's int32 work-item index");
  }

  DeviceGuard guard(device);
  const QueryPlanSize size{static_cast<int64_t>(plan.tiles.size()), static_cast<int64_t>(plan.ranges.size())};
  std::vector<unsigned char> staged(plan_bytes(size));
  std::memcpy(staged.data(), plan.tiles.data(), plan.tiles.size() * sizeof(QueryTile));
  std::memcpy(staged.data() + tiles_bytes(size.tiles), plan.ranges.data(), plan.ranges.size() * sizeof(KeyRange));
  auto* workspace = static_cast<unsigned char*>(aligned_workspace(p.options, device, staged.size()));
  upload_async(workspace, staged.data(), staged.size(), p.options);

  ForwardKernelParams k{};
  k.q_map = make_token_head_tensor_map(p.q, 64, shape.block_m, "q");
  k.k_map = make_token_head_tensor_map(p.k, 64, shape.block_n, "k");
  k.v_map = make_token_head_tensor_map(p.v, 64, shape.block_n, "v");
  k.out = p.out.data;
  k.lse = p.lse.data;
  k.out_token_stride = p.out.token_stride;
  k.out_head_stride = p.out.head_stride;
  k.lse_head_stride = p.lse.head_stride;
  k.tiles = reinterpret_cast<const QueryTile*>(workspace);
  k.ranges = reinterpret_cast<const KeyRange*>(workspace + tiles_bytes(size.tiles));
  k.num_tiles = static_cast<int32_t>(plan.tiles.size());
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
