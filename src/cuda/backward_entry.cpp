// CUDA backend of dualkv::backward: CUDA-only argument checks, the kernel family
// (ExecutionOptions::kernel_family), the tile sizes (Hopper: its one shape per head_dim; portable:
// the fastest compiled shape that fits the shared memory a block may use), the backward plan from
// the layout's cache (built and uploaded by the layout's first backward), the per-call scratch in
// the caller's workspace, and dispatch to the Hopper entry (sm90/backward/backward_entry) or the
// compiled (dtype, tile shape) sm80 kernels.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <string>

#include "cuda/common/argument_checks.h"
#include "cuda/common/device_guard.h"
#include "cuda/common/device_plan.h"
#include "cuda/common/kernel_family.h"
#include "cuda/common/shared_memory_limit.h"
#include "cuda/common/workspace.h"
#include "cuda/sm80/backward/launch.h"
#include "cuda/sm80/backward/tile_shapes.h"
#include "cuda/sm90/backward/dq_accumulator.h"
#ifdef DUALKV_WITH_SM90
#include "cuda/sm90/backward/backward_entry.h"
#endif
#include "dualkv/errors.h"
#include "host/backend.h"
#include "host/backward_plan.h"

namespace dualkv::detail {
namespace {

constexpr int kSm80BackwardHeadDims[] = {64, 128, 256};
static_assert(sm80::lists_head_dims_of(kSm80BackwardHeadDims, sm80::kBackwardTileShapes));

void check_compiled(const BackwardParams& params) {
  check_compiled_dtype(params.q.dtype, "q.dtype");
  check_compiled_head_dim(params.q.head_dim, kSm80BackwardHeadDims, "q.head_dim");
}

// Whether the call runs the Hopper kernels (a forced family the build or device lacks throws).
// kAuto also needs the kernel to fit options.max_shared_memory_per_block; a forced kHopper that
// does not fit is reported by the Hopper entry, naming that option.
bool runs_hopper(const BackwardParams& params) {
#ifdef DUALKV_WITH_SM90
  const bool covered = sm90::backward_covers(params) &&
                       (params.options.kernel_family != KernelFamily::kAuto || sm90::backward_fits(params));
#else
  const bool covered = false;
#endif
  return resolve_kernel_family(params.options.kernel_family, params.q.device.index, covered) == KernelFamily::kHopper;
}

// The tile sizes a call's plan and workspace are built for, and the portable shape that runs it
// (nullptr on the Hopper path).
struct BackwardLaunch {
  int head_dim;
  int key_block;
  int query_block;
  int dq_query_block;  // 0 unless deterministic
  const sm80::BackwardTileShape* portable;
  bool paces_walks;  // Hopper only (sm90/backward/walk_pacing.h)
};

// The first compiled shape of q.head_dim that fits the device's shared memory per block (or
// options.max_shared_memory_per_block): at head_dim 128, 128 x 64 tiles on A100 and Hopper and
// single-buffered 128 x 32 tiles on sm_86/sm_89; at head_dim 256, 64 x 64 and 32 x 32. An Error
// names q.head_dim where the device fits no shape.
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

template <DType kDType>
void run_for_tile_shape(const sm80::BackwardTileShape& shape, const BackwardKernelParams& kernel_params) {
  sm80::visit_tile_shape<sm80::kBackwardTileShapes>(shape, [&](auto index) {
    constexpr sm80::BackwardTileShape kShape = sm80::kBackwardTileShapes[index];
    sm80::run_backward<kDType, kShape.head_dim, kShape.key_block, kShape.query_block>(kernel_params);
  });
}

BackwardLaunch blocks_for(const BackwardParams& params, bool hopper) {
#ifdef DUALKV_WITH_SM90
  if (hopper) {
    const sm90::BackwardBlocks blocks = sm90::backward_blocks(params);
    return {static_cast<int>(params.q.head_dim),
            blocks.key_block,
            blocks.query_block,
            blocks.dq_query_block,
            nullptr,
            blocks.paces_walks};
  }
#endif
  (void)hopper;
  check_compiled(params);
  const sm80::BackwardTileShape& shape = tile_shape_for(params);
  return {shape.head_dim, shape.key_block, shape.query_block, params.deterministic ? shape.dq_query_block : 0, &shape,
          false};
}

BackwardWorkspace workspace_for(const Layout& layout, const BackwardParams& params, const BackwardLaunch& blocks) {
  const bool hopper = blocks.portable == nullptr;
  const int64_t tokens = layout.total_tokens();
  const int64_t dq_accum_rows =
      hopper ? sm90::dq_accumulator_rows(tokens, layout.num_segments(), blocks.query_block) : tokens;
  const int64_t walk_progress_slots = blocks.paces_walks ? count_tiles(layout, blocks.key_block) * params.k.heads : 0;
  return plan_backward_workspace(tokens, dq_accum_rows, params.q.heads, blocks.head_dim, params.deterministic,
                                 /*stores_lse_log2=*/hopper, walk_progress_slots);
}

}  // namespace

size_t cuda_backward_workspace_bytes(const Layout& layout, const BackwardParams& params) {
  check_cuda_accumulation(params.options.accumulation);
  const BackwardLaunch blocks = blocks_for(params, runs_hopper(params));
  return workspace_bytes_for(workspace_for(layout, params, blocks).total_bytes);
}

void cuda_backward(const Layout& layout, const BackwardParams& params) {
  check_cuda_accumulation(params.options.accumulation);
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

  const BackwardLaunch blocks = blocks_for(p, runs_hopper(p));
  check_one_launch(count_tiles(layout, blocks.key_block), p.k.heads, "key tiles");
  if (p.deterministic) check_one_launch(count_tiles(layout, blocks.dq_query_block), p.q.heads, "query tiles");
  const BackwardWorkspace ws = workspace_for(layout, p, blocks);

  DeviceGuard guard(device);
  auto* base = static_cast<char*>(aligned_workspace(p.options, device, ws.total_bytes));
  const DeviceBackwardPlan plan =
      device_backward_plan(layout, blocks.key_block, blocks.query_block, blocks.dq_query_block, device, p.options);

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
  k.lse_log2 = ws.has_lse_log2 ? reinterpret_cast<float*>(base + ws.lse_log2_offset) : nullptr;
  k.stats_row_stride = ws.stats_row_stride;
  k.dq_accum = ws.has_dq_accum ? reinterpret_cast<float*>(base + ws.dq_accum_offset) : nullptr;
  // The portable KV kernel scales each dQ contribution; the Hopper one leaves it to the convert pass.
  k.dq_accum_scale = blocks.portable == nullptr ? p.softmax_scale : 1.f;
  k.cu_seqlens = plan.cu_seqlens;
  k.num_segments = static_cast<int>(layout.num_segments());
  k.cu_runs = plan.cu_runs;
  k.num_runs = static_cast<int>(plan.num_runs);
  k.runs = plan.runs;
  k.key_tiles = plan.key_tiles;
  k.query_tiles = plan.query_tiles;
  k.query_key_ranges = plan.query_key_ranges;
  k.num_key_tiles = static_cast<int>(plan.num_key_tiles);
  k.num_query_tiles = static_cast<int>(plan.num_query_tiles);
  k.tokens = layout.total_tokens();
  k.heads = static_cast<int>(p.q.heads);
  k.kv_heads = static_cast<int>(p.k.heads);
  k.softmax_scale = p.softmax_scale;
  k.stream = p.options.stream;
  k.walk_progress = ws.walk_progress_slots > 0 ? reinterpret_cast<uint64_t*>(base + ws.walk_progress_offset) : nullptr;

#ifdef DUALKV_WITH_SM90
  if (blocks.portable == nullptr) return sm90::backward(p, k);
#endif
  if (p.q.dtype == DType::kFloat16) {
    run_for_tile_shape<DType::kFloat16>(*blocks.portable, k);
  } else {
    run_for_tile_shape<DType::kBFloat16>(*blocks.portable, k);
  }
}

}  // namespace dualkv::detail
