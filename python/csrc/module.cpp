// The Python module dualkv._C. Importing it loads the torch library "dualkv" (library_*.cpp);
// the functions below expose the C++ layout factories so that Python layouts are validated by
// the same code as every operator call. dualkv::Error derives from std::invalid_argument, which
// pybind11 raises as ValueError, message intact.
#include <pybind11/stl.h>
#include <torch/python.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "dualkv/dualkv.h"
#include "tensor_views.h"

namespace dualkv::torch_binding {
namespace {

std::pair<at::Tensor, at::Tensor> offsets_from_lengths(const std::vector<int64_t>& prompt_lengths,
                                                       const std::vector<std::vector<int64_t>>& response_lengths) {
  return layout_to_tensors(Layout::from_lengths(prompt_lengths, response_lengths));
}

void validate_offsets(const at::Tensor& cu_seqlens, const at::Tensor& cu_groups) {
  layout_from_tensors(cu_seqlens, cu_groups);
}

}  // namespace
}  // namespace dualkv::torch_binding

PYBIND11_MODULE(_C, m) {
  m.doc() = "dualkv C++ core: layout validation and the torch.ops.dualkv operators";
  using namespace dualkv::torch_binding;
  m.def("offsets_from_lengths", &offsets_from_lengths, pybind11::arg("prompt_lengths"),
        pybind11::arg("response_lengths"),
        "(cu_seqlens, cu_groups) as int32 CPU tensors; raises ValueError on an invalid layout");
  m.def("validate_offsets", &validate_offsets, pybind11::arg("cu_seqlens"), pybind11::arg("cu_groups"),
        "Raises ValueError unless the offsets form a valid layout");
  m.def("cuda_compiled", &dualkv::cuda_compiled, "Whether this build contains the CUDA kernels");
}
