// Oracle (a): attention over the whole packed tensor with a dense T x T mask built from the
// visibility definition of include/dualkv/layout.h, token by token.
#pragma once

#include "cpu/batch_spec.h"
#include "cpu/oracle_attention.h"

namespace dualkv_test::oracle {

// visible(q, k) iff q and k are in the same group, k <= q, and k is in the group's prompt or in
// q's own segment.
KeyMask packed_mask(const BatchSpec& batch);

ForwardResult dense_mask_forward(const BatchSpec& batch, const DenseTensor& q, const DenseTensor& k,
                                 const DenseTensor& v, double scale);

Gradients dense_mask_backward(const BatchSpec& batch, const DenseTensor& q, const DenseTensor& k, const DenseTensor& v,
                              const DenseTensor& dout, double scale);

}  // namespace dualkv_test::oracle
