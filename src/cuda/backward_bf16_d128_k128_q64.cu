// sm80 backward kernels for bf16, head_dim 128, 128-key / 64-query tiles (host/backward_plan.h).
#include "cuda/sm80/backward/launch.cuh"

namespace dualkv::sm80 {
template void run_backward<DType::kBFloat16, 128, 128, 64>(const BackwardParams& params);
}  // namespace dualkv::sm80
