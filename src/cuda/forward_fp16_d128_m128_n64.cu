// sm80 forward kernel for fp16, head_dim 128, 128-query / 64-key tiles (sm80/forward/tile_shape.h); one
// unit per kernel keeps builds parallel.
#include "cuda/sm80/forward/forward_launch.cuh"

namespace dualkv::detail {

template void launch_sm80_forward<DType::kFloat16, 128, 128, 64>(const ForwardKernelParams&, int32_t, cudaStream_t);

}  // namespace dualkv::detail
