// What the forward and backward tile-shape tables of the sm80 kernels have in common: a call runs
// the first (fastest) compiled shape of its head_dim whose kernels fit the shared memory a block
// may use, and the entry point reaches that shape's instantiation through its index in the table.
// Plain C++, so that a CPU test checks the selection with the numbers the kernels are compiled with.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>

#include "dualkv/errors.h"

namespace dualkv::detail::sm80 {

// The first shape of head_dim in `shapes` (each with a head_dim member, fastest first within a
// head_dim) for which shared_bytes(shape), the most shared memory any of its kernels asks for per
// block, is at most limit_bytes. Throws dualkv::Error naming q.head_dim if no shape of head_dim is
// compiled, and naming `limit_name` if none fits; `what` names the kernels in the message.
template <typename Shape, size_t kCount, typename SharedBytes>
const Shape& select_tile_shape(const Shape (&shapes)[kCount], int64_t head_dim, size_t limit_bytes,
                               const char* limit_name, const char* what, const SharedBytes& shared_bytes) {
  size_t least_bytes = 0;  // of the compiled shapes for head_dim; 0 while none is found
  for (const Shape& shape : shapes) {
    if (shape.head_dim != head_dim) continue;
    const size_t bytes = shared_bytes(shape);
    if (bytes <= limit_bytes) return shape;
    least_bytes = least_bytes == 0 ? bytes : std::min(least_bytes, bytes);
  }
  if (least_bytes == 0) {
    throw Error("q.head_dim", std::string(what) + " is not compiled for head_dim " + std::to_string(head_dim));
  }
  throw Error(limit_name, std::string(what) + " for head_dim " + std::to_string(head_dim) + " needs at least " +
                              std::to_string(least_bytes) + " bytes of shared memory per block; the limit is " +
                              std::to_string(limit_bytes));
}

// Whether `head_dims` (the list an entry point checks a call's head_dim against first) names
// exactly the head dims of `shapes`.
template <size_t kDims, typename Shape, size_t kCount>
constexpr bool lists_head_dims_of(const int (&head_dims)[kDims], const Shape (&shapes)[kCount]) {
  for (const Shape& shape : shapes) {
    bool listed = false;
    for (const int head_dim : head_dims) listed = listed || head_dim == shape.head_dim;
    if (!listed) return false;
  }
  for (const int head_dim : head_dims) {
    bool compiled = false;
    for (const Shape& shape : shapes) compiled = compiled || head_dim == shape.head_dim;
    if (!compiled) return false;
  }
  return true;
}

template <const auto& kShapes, typename Shape, typename Run, size_t... kIndex>
void visit_tile_shape(const Shape& shape, const Run& run, std::index_sequence<kIndex...>) {
  ((&shape == &kShapes[kIndex] ? run(std::integral_constant<size_t, kIndex>{}) : void()), ...);
}

// Calls run(std::integral_constant<size_t, i>{}) for the i with &shape == &kShapes[i], so that
// `run` names the kernels of kShapes[i] at compile time: every shape of the table is
// instantiated (one without an instantiation unit fails to link).
template <const auto& kShapes, typename Shape, typename Run>
void visit_tile_shape(const Shape& shape, const Run& run) {
  visit_tile_shape<kShapes>(shape, run, std::make_index_sequence<std::size(kShapes)>{});
}

}  // namespace dualkv::detail::sm80
