// sm90a backward kernel instantiation: fp16, head_dim 256 (one unit per kernel keeps builds parallel).
#include "cuda/sm90/backward/launch.cuh"

namespace dualkv::detail::sm90 {

template void run_backward<DType::kFloat16, 256>(const BackwardTmaParams&);
template size_t backward_shared_memory_bytes<DType::kFloat16, 256>();

}  // namespace dualkv::detail::sm90
