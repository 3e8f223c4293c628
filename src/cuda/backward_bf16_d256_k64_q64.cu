// sm80 backward kernels for bf16, head_dim 256, 64-key / 64-query tiles (sm80/backward/tile_shapes.h).
#include "cuda/sm80/backward/launch.cuh"

namespace dualkv::detail::sm80 {
template void run_backward<DType::kBFloat16, 256, 64, 64>(const BackwardKernelParams& params);
}  // namespace dualkv::detail::sm80
