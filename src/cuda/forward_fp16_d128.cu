// sm80 forward kernel instantiation: fp16, head_dim 128 (one unit per kernel keeps builds parallel).
#include "cuda/sm80/forward/forward_launch.cuh"

namespace dualkv::detail {

template void launch_sm80_forward<DType::kFloat16, 128>(const ForwardKernelParams&, int32_t, cudaStream_t);

}  // namespace dualkv::detail
