// The dualkv::Layout of an operator call, one per pair of layout tensors (cu_seqlens, parents) for as long as the
// tensors live. A dualkv::Layout keeps the device work plans its CUDA calls build
// (include/dualkv/layout.h); the operators get a Python Layout's offsets as tensors on every call,
// so without this each call would rebuild the C++ Layout and upload its plans again. With it, the
// calls of every layer share one Layout: the plans are uploaded once per Python Layout (the
// tensors are its own; autograd saves the same tensors for the backward) and freed after its
// tensors are gone.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>

#include "dualkv/layout.h"

namespace dualkv::torch_binding {

// Validates like layout_from_tensors (tensor_views.h) on every call. Offsets changed in place
// since the last call get a new Layout.
std::shared_ptr<const Layout> layout_of_call(const at::Tensor& cu_seqlens, const at::Tensor& parents);

}  // namespace dualkv::torch_binding
