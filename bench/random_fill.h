// Random device tensors for the benchmark, generated on the device (host generation of the
// largest shapes would take longer than the measurement). Never zeros: zeros run faster than
// real data on some GPUs and hide unwritten outputs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dualkv/tensor.h"

namespace dualkv::bench {

// Uniform values in [-1, 1) in `dtype` (fp16 or bf16), reproducible from `seed`.
void fill_uniform(void* data, DType dtype, size_t elements, uint64_t seed);

}  // namespace dualkv::bench
