// Conversion of torch tensors into the non-owning views of dualkv/tensor.h and dualkv/layout.h.
//
// Every function here throws dualkv::Error naming the argument, so that one error translation
// (error_translation.h) covers the binding's own checks and the core's validation alike.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "dualkv/layout.h"
#include "dualkv/tensor.h"
#include "dualkv/token_scores.h"

namespace dualkv::torch_binding {

// dualkv views need a unit-stride last dimension and memory that does not overlap itself; any
// other strides are fine, so a slice of a fused QKV projection is used in place. Returns
// `tensor` itself when it qualifies, otherwise a contiguous copy: torch produces self-overlap
// only by broadcasting (stride 0, e.g. the expanded gradient of a sum), which is checked here;
// the core rejects any other overlap by name. The caller keeps the result alive while viewed.
at::Tensor in_viewable_layout(const at::Tensor& tensor);

// A (tokens, heads, head_dim) tensor whose last dimension has unit stride.
InputTensor input_view(const at::Tensor& tensor, const char* name);
OutputTensor output_view(const at::Tensor& tensor, const char* name);

// A (heads, tokens) fp32 tensor whose token dimension has unit stride.
LseInput lse_input_view(const at::Tensor& lse, const char* name);
LseOutput lse_output_view(const at::Tensor& lse, const char* name);

// A (rows, vocab) matrix whose vocab dimension has unit stride.
VocabRows<const void*> vocab_rows_input(const at::Tensor& tensor, const char* name);
VocabRows<void*> vocab_rows_output(const at::Tensor& tensor, const char* name);

// A 1-D contiguous float32 or int64 tensor.
Values<const float*> float_values_input(const at::Tensor& tensor, const char* name);
Values<float*> float_values_output(const at::Tensor& tensor, const char* name);
Values<const int64_t*> index_values_input(const at::Tensor& tensor, const char* name);

// The layout from its segment offsets and parents, 1-D int32 CPU tensors; validated by
// Layout::from_tree_offsets.
Layout layout_from_tensors(const at::Tensor& cu_seqlens, const at::Tensor& parents);

// The two-level layout from its segment and group offsets, 1-D int32 CPU tensors; validated by
// Layout::from_offsets.
Layout layout_from_group_tensors(const at::Tensor& cu_seqlens, const at::Tensor& cu_groups);

// An int32 array as a new 1-D int32 CPU tensor.
at::Tensor tensor_from_offsets(const std::vector<int32_t>& offsets);

}  // namespace dualkv::torch_binding
