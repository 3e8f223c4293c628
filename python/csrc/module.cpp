// The Python module dualkv._C. Importing it loads the torch library "dualkv" (library_*.cpp);
// the functions below expose the C++ layout factories so that Python layouts are validated by
// the same code as every operator call. dualkv::Error derives from std::invalid_argument, which
// pybind11 raises as ValueError, message intact.
#include <pybind11/stl.h>
#include <torch/python.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "dualkv/dualkv.h"
#include "tensor_views.h"

namespace dualkv::torch_binding {
namespace {

// A layout as the operator takes it: (cu_seqlens, parents), new int32 CPU tensors.
std::pair<at::Tensor, at::Tensor> operator_tensors(const Layout& layout) {
  return {tensor_from_offsets(layout.cu_seqlens()), tensor_from_offsets(layout.parents())};
}

std::pair<at::Tensor, at::Tensor> layout_from_lengths(const std::vector<int64_t>& prompt_lengths,
                                                      const std::vector<std::vector<int64_t>>& response_lengths) {
  return operator_tensors(Layout::from_lengths(prompt_lengths, response_lengths));
}

std::pair<at::Tensor, at::Tensor> layout_from_offsets(const at::Tensor& cu_seqlens, const at::Tensor& cu_groups) {
  return operator_tensors(layout_from_group_tensors(cu_seqlens, cu_groups));
}

std::pair<at::Tensor, at::Tensor> layout_from_tree(const std::vector<int64_t>& parents,
                                                   const std::vector<int64_t>& lengths) {
  return operator_tensors(Layout::from_tree(parents, lengths));
}

// What the Python Layout derives from (cu_seqlens, parents), validated: cu_groups (None unless
// the layout is two-level), each segment's first position id, and the depth.
std::tuple<std::optional<at::Tensor>, at::Tensor, int32_t> describe_layout(const at::Tensor& cu_seqlens,
                                                                           const at::Tensor& parents) {
  const Layout layout = layout_from_tensors(cu_seqlens, parents);
  std::vector<int32_t> position_begins(static_cast<size_t>(layout.num_segments()));
  for (int32_t s = 0; s < layout.num_segments(); ++s)
    position_begins[static_cast<size_t>(s)] = layout.position_begin(s);
  std::optional<at::Tensor> cu_groups;
  if (layout.is_two_level()) cu_groups = tensor_from_offsets(layout.cu_groups());
  return {cu_groups, tensor_from_offsets(position_begins), layout.depth()};
}

}  // namespace
}  // namespace dualkv::torch_binding

PYBIND11_MODULE(_C, m) {
  m.doc() = "dualkv C++ core: layout validation and the torch.ops.dualkv operators";
  using namespace dualkv::torch_binding;
  m.def("layout_from_lengths", &layout_from_lengths, pybind11::arg("prompt_lengths"), pybind11::arg("response_lengths"),
        "(cu_seqlens, parents) of a two-level layout as int32 CPU tensors; raises ValueError on an invalid layout");
  m.def("layout_from_offsets", &layout_from_offsets, pybind11::arg("cu_seqlens"), pybind11::arg("cu_groups"),
        "(cu_seqlens, parents) of the two-level layout with these offsets; raises ValueError unless they are valid");
  m.def("layout_from_tree", &layout_from_tree, pybind11::arg("parents"), pybind11::arg("lengths"),
        "(cu_seqlens, parents) of a tree layout; raises ValueError on an invalid tree");
  m.def("describe_layout", &describe_layout, pybind11::arg("cu_seqlens"), pybind11::arg("parents"),
        "(cu_groups or None, position_begins, depth) of a layout; raises ValueError unless it is valid");
  m.def("cuda_compiled", &dualkv::cuda_compiled, "Whether this build contains the CUDA kernels");
}
