#include "cuda/sm90/backward/backward_entry.h"

#include <cuda_runtime_api.h>

#include "cuda/common/shared_memory_limit.h"
#include "cuda/common/tensor_map.h"
#include "cuda/sm90/backward/deterministic_dq.h"
#include "cuda/sm90/backward/dq_accumulator.h"
#include "cuda/sm90/backward/launch.h"
#include "cuda/sm90/backward/tile_shape.h"

namespace dualkv::detail::sm90 {
namespace {

template <DType kDType>
struct HeadDimDispatch {
  static size_t shared_memory_bytes(int64_t head_dim) {
    switch (head_dim) {
      case 64:
        return backward_shared_memory_bytes<kDType, 64>();
      case 128:
        return backward_shared_memory_bytes<kDType, 128>();
      default:
        return backward_shared_memory_bytes<kDType, 256>();
    }
  }
  static void run(int64_t head_dim, const BackwardTmaParams& params) {
    switch (head_dim) {
      case 64:
        return run_backward<kDType, 64>(params);
      case 128:
        return run_backward<kDType, 128>(params);
      default:
        return run_backward<kDType, 256>(params);
    }
  }
};

// The KV kernel's shared memory; in deterministic mode the portable dQ kernel's too.
size_t shared_memory_bytes(const BackwardParams& p) {
  const size_t kv = p.q.dtype == DType::kFloat16 ? HeadDimDispatch<DType::kFloat16>::shared_memory_bytes(p.q.head_dim)
                                                 : HeadDimDispatch<DType::kBFloat16>::shared_memory_bytes(p.q.head_dim);
  const size_t dq = p.deterministic ? sm80::backward_dq_shared_memory_bytes(*deterministic_dq_shape(p.q.head_dim)) : 0;
  return kv > dq ? kv : dq;
}

}  // namespace

bool backward_covers(const BackwardParams& params) {
  static_assert(sizeof(kBackwardTileShapes) / sizeof(kBackwardTileShapes[0]) == 3,
                "add the new head_dim to HeadDimDispatch");
  return (params.q.dtype == DType::kFloat16 || params.q.dtype == DType::kBFloat16) &&
         find_backward_tile_shape(params.q.head_dim) != nullptr;
}

bool backward_fits(const BackwardParams& params) {
  return shared_memory_bytes(params) <= shared_memory_limit(params.options, params.q.device.index).bytes;
}

BackwardBlocks backward_blocks(const BackwardParams& params) {
  const BackwardTileShape& shape = *find_backward_tile_shape(params.q.head_dim);
  return {shape.block_n, shape.block_m, params.deterministic ? kDeterministicDqShape.dq_query_block : 0,
          shape.walk_lead_steps > 0};
}

void backward(const BackwardParams& p, const BackwardKernelParams& kernel_params) {
  const BackwardTileShape& shape = *find_backward_tile_shape(p.q.head_dim);
  check_fits_shared_memory(shared_memory_bytes(p), shared_memory_limit(p.options, p.q.device.index),
                           "the Hopper backward");
  BackwardTmaParams params{};
  params.base = kernel_params;
  params.q_map = make_token_head_tensor_map(p.q, 64, shape.block_m, "q");
  params.dout_map = make_token_head_tensor_map(p.dout, 64, shape.block_m, "dout");
  params.k_map = make_token_head_tensor_map(p.k, 64, shape.block_n, "k");
  params.v_map = make_token_head_tensor_map(p.v, 64, shape.block_n, "v");
  params.dq_accum_head_stride =
      dq_accumulator_rows(kernel_params.tokens, kernel_params.num_segments, shape.block_m) * p.q.head_dim;
  if (p.q.dtype == DType::kFloat16) {
    HeadDimDispatch<DType::kFloat16>::run(p.q.head_dim, params);
  } else {
    HeadDimDispatch<DType::kBFloat16>::run(p.q.head_dim, params);
  }
}

}  // namespace dualkv::detail::sm90
