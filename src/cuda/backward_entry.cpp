// CUDA backend of dualkv::backward: CUDA-only argument checks, the choice of tile shape (the
// fastest compiled one that fits the shared memory a block may use), the backward plan from the
// layout's cache (built and uploaded by the layout's first backward), the per-call scratch in the
// caller's workspace, and dispatch to the compiled (dtype, tile shape) sm80 kernels.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "cuda/common/argument_checks.h"
#include "cuda/common/device_guard.h"
#include "cuda/common/device_plan.h"
#include "cuda/common/shared_memory_limit.h"
#include "cuda/common/workspace.h"
#include "cuda/sm80/backward/launch.h"
#include "cuda/sm80/backward/tile_shapes.h"
#include "dualkv/errors.h"
#include "host/backend.h"
#include "host/backward_plan.h"

namespace dualkv::detail {
namespace {

constexpr int kSm80BackwardHeadDims[] = {64, 128};

void check_compiled(const BackwardParams& params) {
  check_cuda_accumulation(params.options.accumulation);
  if (params.options.kernel_family == KernelFamily::kHopper) {
    throw Error("options.kernel_family",
                "the Hopper backward is not built yet: kAuto and kPortable run the portable backward");
  }
  check_compiled_dtype(params.q.dtype, "q.dtype");
  check_compiled_head_dim(params.q.head_dim, kSm80BackwardHeadDims, "q.head_dim");
}

// The first compiled shape of q.head_dim that fits the device's shared memory per block (or
// options.max_shared_memory_per_block): at head_dim 128, 128 x 64 tiles on A100 and Hopper and
// single-buffered 128 x 32 tiles on sm_86/sm_89. An Error names q.head_dim where the device fits
// no shape.
const sm80::BackwardTileShape& tile_shape_for(const BackwardParams& params) {
  const SharedMemoryLimit limit = shared_memory_limit(params.options, params.q.device.index);
  return sm80::select_backward_tile_shape(params.q.head_dim, params.deterministic, limit.bytes, limit.argument);
}

void check_one_launch(int64_t tiles, int64_t heads, const char* what) {
  if (tiles * heads > std::numeric_limits<int32_t>::max()) {
    throw Error("layout", std::string(what) + " (" + std::to_string(tiles) + ") x heads (" + std::to_string(heads) +
                              ") exceed one CUDA launch (2^31 - 1 CTAs)");
  }
}

template <typename Pointer>
TokenHeadView<Pointer> view_of(const TokenHeadTensor<Pointer>& t) {
  return {t.data, t.token_stride, t.head_stride};
}

// Runs the instantiation of kBackwardTileShapes[i] for the i with &shape == &kBackwardTileShapes[i];
// every shape of the table is instantiated (a missing one fails to link).
template <DType kDType, size_t... kShapeIndex>
void run_for_tile_shape(const sm80::BackwardTileShape& shape, const BackwardKernelParams& kernel_params,
                        std::index_sequence<kShapeIndex...>) {
  using sm80::kBackwardTileShapes;
  ((&shape == &kBackwardTileShapes[kShapeIndex]
        ? sm80::run_backward<kDType, kBackwardTileShapes[kShapeIndex].head_dim,
                             kBackwardTileShapes[kShapeIndex].key_block, kBackwardTileShapes[kShapeIndex].query_block>(
              kernel_params)
        : void()),
   ...);
}

template <DType kDType>
void run_for_tile_shape(const sm80::BackwardTileShape& shape, const BackwardKernelParams& kernel_params) {
  constexpr size_t kShapes = sizeof(sm80::kBackwardTileShapes) / sizeof(sm80::kBackwardTileShapes[0]);
  run_for_tile_shape<kDType>(shape, kernel_params, std::make_index_sequence<kShapes>{});
}

}  // namespace

size_t cuda_backward_workspace_bytes(const Layout& layout, const BackwardParams& params) {
  check_compiled(params);
  const sm80::BackwardTileShape& shape = tile_shape_for(params);
  return workspace_bytes_for(
      plan_backward_workspace(layout.total_tokens(), params.q.heads, shape.head_dim, params.deterministic).total_bytes);
}

void cuda_backward(const Layout& layout, const BackwardParams& params) {
  check_compiled(params);
  const BackwardParams& p = params;
  const int device = p.q.device.index;
  check_device_pointer(p.dout.data, p.dout.device, "dout");
  check_device_pointer(p.q.data, p.q.device, "q");
  check_device_pointer(p.k.data, p.k.device, "k");
  check_device_pointer(p.v.data, p.v.device, "v");
  check_device_pointer(p.out.data, p.out.device, "out");
  check_device_pointer(p.lse.data, p.lse.device, "lse");
  check_device_pointer(p.dq.data, p.dq.device, "dq");
  check_device_pointer(p.dk.data, p.dk.device, "dk");
  check_device_pointer(p.dv.data, p.dv.device, "dv");
  check_vector_aligned(p.dout, "dout");
  check_vector_aligned(p.q, "q");
  check_vector_aligned(p.k, "k");
  check_vector_aligned(p.v, "v");
  check_vector_aligned(p.out, "out");
  check_vector_aligned(p.dq, "dq");
  check_vector_aligned(p.dk, "dk");
  check_vector_aligned(p.dv, "dv");

  const sm80::BackwardTileShape& shape = tile_shape_for(p);
  const int dq_query_block = p.deterministic ? shape.dq_query_block : 0;  // the dQ kernel's tiles, if it runs
  check_one_launch(count_tiles(layout, shape.key_block), p.k.heads, "key tiles");
  if (p.deterministic) check_one_launch(count_tiles(layout, dq_query_block), p.q.heads, "query tiles");
  const BackwardWorkspace ws =
      plan_backward_workspace(layout.total_tokens(), p.q.heads, shape.head_dim, p.deterministic);

  DeviceGuard guard(device);
  auto* base = static_cast<char*>(aligned_workspace(p.options, device, ws.total_bytes));
  const DeviceBackwardPlan plan =
      device_backward_plan(layout, shape.key_block, shape.query_block, dq_query_block, device, p.options);

  BackwardKernelParams k{};
  k.dout = view_of(p.dout);
  k.q = view_of(p.q);
  k.k = view_of(p.k);
  k.v = view_of(p.v);
  k.out = view_of(p.out);
  k.dq = view_of(p.dq);
  k.dk = view_of(p.dk);
  k.dv = view_of(p.dv);
  k.lse = p.lse.data;
  k.lse_head_stride = p.lse.head_stride;
  k.delta = reinterpret_cast<float*>(base + ws.delta_offset);
  k.dq_accum = ws.has_dq_accum ? reinterpret_cast<float*>(base + ws.dq_accum_offset) : nullptr;
  k.cu_seqlens = plan.cu_seqlens;
  k.key_tiles = plan.key_tiles;
  k.query_tiles = plan.query_tiles;
  k.num_key_tiles = static_cast<int>(plan.num_key_tiles);
  k.num_query_tiles = static_cast<int>(plan.num_query_tiles);
  k.tokens = layout.total_tokens();
  k.heads = static_cast<int>(p.q.heads);
  k.kv_heads = static_cast<int>(p.k.heads);
  k.softmax_scale = p.softmax_scale;
  k.stream = p.options.stream;

  if (p.q.dtype == DType::kFloat16) {
    run_for_tile_shape<DType::kFloat16>(shape, k);
  } else {
    run_for_tile_shape<DType::kBFloat16>(shape, k);
  }
}

}  // namespace dualkv::detail
