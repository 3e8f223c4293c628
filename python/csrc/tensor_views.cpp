#include "tensor_views.h"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dualkv/errors.h"

namespace dualkv::torch_binding {
namespace {

DType dtype_of(const at::Tensor& tensor, const char* name) {
  switch (tensor.scalar_type()) {
    case at::kFloat:
      return DType::kFloat32;
    case at::kHalf:
      return DType::kFloat16;
    case at::kBFloat16:
      return DType::kBFloat16;
    default:
      throw Error(
          name, std::string("dtype must be float32, float16 or bfloat16, got ") + c10::toString(tensor.scalar_type()));
  }
}

Device device_of(const at::Tensor& tensor, const char* name) {
  const at::Device device = tensor.device();
  if (device.is_cpu()) return Device{DeviceKind::kCpu, 0};
  if (device.is_cuda()) return Device{DeviceKind::kCuda, device.index()};
  throw Error(name, "must be a CPU or CUDA tensor, got device " + device.str());
}

void require_dim(const at::Tensor& tensor, const char* name, int64_t dim, const char* shape) {
  if (tensor.dim() != dim) {
    throw Error(name, std::string("must have ") + std::to_string(dim) + " dimensions " + shape + ", got " +
                          std::to_string(tensor.dim()));
  }
}

// dtype_name is how a user writes it ("float32"); torch's own names ("Float") are for the one found.
void require_dtype(const at::Tensor& tensor, const char* name, at::ScalarType dtype, const char* dtype_name) {
  if (tensor.scalar_type() != dtype) {
    throw Error(name, std::string("dtype must be ") + dtype_name + ", got " + c10::toString(tensor.scalar_type()));
  }
}

void require_unit_stride_last_dim(const at::Tensor& tensor, const char* name) {
  if (tensor.size(-1) > 1 && tensor.stride(-1) != 1) {
    throw Error(name, "last dimension must have stride 1, got " + std::to_string(tensor.stride(-1)));
  }
}

template <typename Pointer>
TokenHeadTensor<Pointer> token_head_view(const at::Tensor& tensor, const char* name, Pointer data) {
  require_dim(tensor, name, 3, "(tokens, heads, head_dim)");
  require_unit_stride_last_dim(tensor, name);
  TokenHeadTensor<Pointer> view;
  view.data = data;
  view.dtype = dtype_of(tensor, name);
  view.device = device_of(tensor, name);
  view.tokens = tensor.size(0);
  view.heads = tensor.size(1);
  view.head_dim = tensor.size(2);
  view.token_stride = tensor.stride(0);
  view.head_stride = tensor.stride(1);
  return view;
}

void check_lse(const at::Tensor& lse, const char* name) {
  require_dim(lse, name, 2, "(heads, tokens)");
  require_unit_stride_last_dim(lse, name);
  require_dtype(lse, name, at::kFloat, "float32");
}

template <typename Pointer>
LseTensor<Pointer> lse_view(const at::Tensor& lse, const char* name, Pointer data) {
  LseTensor<Pointer> view;
  view.data = data;
  view.device = device_of(lse, name);
  view.heads = lse.size(0);
  view.tokens = lse.size(1);
  view.head_stride = lse.stride(0);
  return view;
}

template <typename Pointer>
VocabRows<Pointer> vocab_rows_view(const at::Tensor& tensor, const char* name, Pointer data) {
  require_dim(tensor, name, 2, "(rows, vocab)");
  require_unit_stride_last_dim(tensor, name);
  VocabRows<Pointer> view;
  view.data = data;
  view.dtype = dtype_of(tensor, name);
  view.device = device_of(tensor, name);
  view.rows = tensor.size(0);
  view.vocab = tensor.size(1);
  view.row_stride = tensor.stride(0);
  return view;
}

// Checked before the data pointer is taken: torch's typed accessors throw their own error.
void require_values(const at::Tensor& tensor, const char* name, at::ScalarType dtype, const char* dtype_name) {
  require_dim(tensor, name, 1, "(count,)");
  require_dtype(tensor, name, dtype, dtype_name);
  if (tensor.numel() > 1 && tensor.stride(0) != 1) {
    throw Error(name, "must be contiguous, got stride " + std::to_string(tensor.stride(0)));
  }
}

std::vector<int32_t> offsets_from_tensor(const at::Tensor& offsets, const char* name) {
  require_dim(offsets, name, 1, "(count,)");
  require_dtype(offsets, name, at::kInt, "int32");
  if (!offsets.device().is_cpu()) {
    throw Error(name, "must be a CPU tensor, got device " + offsets.device().str());
  }
  const at::Tensor contiguous = offsets.contiguous();
  const int32_t* data = contiguous.const_data_ptr<int32_t>();
  return std::vector<int32_t>(data, data + contiguous.numel());
}

}  // namespace

at::Tensor in_viewable_layout(const at::Tensor& tensor) {
  bool viewable = tensor.dim() == 0 || tensor.size(-1) <= 1 || tensor.stride(-1) == 1;
  for (int64_t dim = 0; dim < tensor.dim(); ++dim) {
    viewable = viewable && (tensor.size(dim) <= 1 || tensor.stride(dim) != 0);
  }
  return viewable ? tensor : tensor.contiguous();
}

InputTensor input_view(const at::Tensor& tensor, const char* name) {
  return token_head_view<const void*>(tensor, name, tensor.const_data_ptr());
}

OutputTensor output_view(const at::Tensor& tensor, const char* name) {
  return token_head_view<void*>(tensor, name, tensor.mutable_data_ptr());
}

LseInput lse_input_view(const at::Tensor& lse, const char* name) {
  check_lse(lse, name);
  return lse_view<const float*>(lse, name, lse.const_data_ptr<float>());
}

LseOutput lse_output_view(const at::Tensor& lse, const char* name) {
  check_lse(lse, name);
  return lse_view<float*>(lse, name, lse.mutable_data_ptr<float>());
}

VocabRows<const void*> vocab_rows_input(const at::Tensor& tensor, const char* name) {
  return vocab_rows_view<const void*>(tensor, name, tensor.const_data_ptr());
}

VocabRows<void*> vocab_rows_output(const at::Tensor& tensor, const char* name) {
  return vocab_rows_view<void*>(tensor, name, tensor.mutable_data_ptr());
}

Values<const float*> float_values_input(const at::Tensor& tensor, const char* name) {
  require_values(tensor, name, at::kFloat, "float32");
  return {tensor.const_data_ptr<float>(), device_of(tensor, name), tensor.numel()};
}

Values<float*> float_values_output(const at::Tensor& tensor, const char* name) {
  require_values(tensor, name, at::kFloat, "float32");
  return {tensor.mutable_data_ptr<float>(), device_of(tensor, name), tensor.numel()};
}

Values<const int64_t*> index_values_input(const at::Tensor& tensor, const char* name) {
  require_values(tensor, name, at::kLong, "int64");
  return {tensor.const_data_ptr<int64_t>(), device_of(tensor, name), tensor.numel()};
}

Layout layout_from_tensors(const at::Tensor& cu_seqlens, const at::Tensor& parents) {
  return Layout::from_tree_offsets(offsets_from_tensor(cu_seqlens, "cu_seqlens"),
                                   offsets_from_tensor(parents, "parents"));
}

Layout layout_from_group_tensors(const at::Tensor& cu_seqlens, const at::Tensor& cu_groups) {
  return Layout::from_offsets(offsets_from_tensor(cu_seqlens, "cu_seqlens"),
                              offsets_from_tensor(cu_groups, "cu_groups"));
}

at::Tensor tensor_from_offsets(const std::vector<int32_t>& offsets) {
  at::Tensor tensor = at::empty({static_cast<int64_t>(offsets.size())}, at::kInt);
  std::copy(offsets.begin(), offsets.end(), tensor.mutable_data_ptr<int32_t>());
  return tensor;
}

}  // namespace dualkv::torch_binding
