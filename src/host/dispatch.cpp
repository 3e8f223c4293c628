// Public entry points: validate on the host, then hand over to the backend of the tensors' device.
#include "dualkv/dualkv.h"
#include "host/backend.h"
#include "host/validate.h"

namespace dualkv {
#ifdef DUALKV_WITH_CUDA
namespace {

bool on_cuda(const InputTensor& q) { return q.device.kind == DeviceKind::kCuda; }

}  // namespace
#endif

void forward(const Layout& layout, const ForwardParams& params) {
  detail::validate_forward(layout, params);
#ifdef DUALKV_WITH_CUDA
  if (on_cuda(params.q)) return detail::cuda_forward(layout, params);
#endif
  detail::cpu_forward(layout, params);
}

void backward(const Layout& layout, const BackwardParams& params) {
  detail::validate_backward(layout, params);
#ifdef DUALKV_WITH_CUDA
  if (on_cuda(params.q)) return detail::cuda_backward(layout, params);
#endif
  detail::cpu_backward(layout, params);
}

size_t forward_workspace_bytes(const Layout& layout, const ForwardParams& params) {
  detail::validate_forward(layout, params);
#ifdef DUALKV_WITH_CUDA
  if (on_cuda(params.q)) return detail::cuda_forward_workspace_bytes(layout, params);
#endif
  return 0;
}

size_t backward_workspace_bytes(const Layout& layout, const BackwardParams& params) {
  detail::validate_backward(layout, params);
#ifdef DUALKV_WITH_CUDA
  if (on_cuda(params.q)) return detail::cuda_backward_workspace_bytes(layout, params);
#endif
  return 0;
}

bool cuda_compiled() {
#ifdef DUALKV_WITH_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace dualkv
