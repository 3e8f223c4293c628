// sm90a forward kernel instantiation: fp16, head_dim 256 (one unit per kernel keeps builds parallel).
#include "cuda/sm90/forward/launch.cuh"

namespace dualkv::detail::sm90 {

template void launch_forward<DType::kFloat16, 256>(const ForwardKernelParams&, int, cudaStream_t);
template size_t forward_shared_memory_bytes<DType::kFloat16, 256>();

}  // namespace dualkv::detail::sm90
