// The two inner loops of the CPU path, written so that the compiler vectorises them at -O3
// without -ffast-math (no floating-point reduction is reordered):
//   - dot_tile: a kRowTile x kColumnTile block of dot products. The column operand is stored
//     dim-major (one contiguous run of tokens per head-dim index), so the innermost loop runs
//     over kColumnTile independent accumulators instead of reducing along head_dim;
//   - add_scaled: y += alpha * x along the contiguous head dimension.
// Summation order is fixed by the loop structure, so results are bitwise reproducible.
#pragma once

#include <cstdint>

namespace dualkv::detail::cpu {

// Rows share each column load; columns share each row element. 4 x 8 accumulators fit the
// sixteen 128-bit registers of baseline x86-64 in fp32 with room for the operands.
inline constexpr int kRowTile = 4;
inline constexpr int kColumnTile = 8;

template <typename Acc>
using ScoreTile = Acc[kRowTile][kColumnTile];

// tile[r][c] = sum_i rows[r][i] * columns[i * column_stride + c].
template <typename Acc>
inline void dot_tile(const Acc* const (&rows)[kRowTile], const Acc* columns, int64_t column_stride,
                     int64_t head_dim, ScoreTile<Acc>& tile) {
  Acc acc[kRowTile][kColumnTile] = {};
  for (int64_t i = 0; i < head_dim; ++i) {
    const Acc* column = columns + i * column_stride;
    for (int r = 0; r < kRowTile; ++r) {
      const Acc a = rows[r][i];
      for (int c = 0; c < kColumnTile; ++c) acc[r][c] += a * column[c];
    }
  }
  for (int r = 0; r < kRowTile; ++r) {
    for (int c = 0; c < kColumnTile; ++c) tile[r][c] = acc[r][c];
  }
}

template <typename Acc>
inline void add_scaled(Acc alpha, const Acc* x, int64_t n, Acc* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

template <typename Acc>
inline void scale_in_place(Acc alpha, int64_t n, Acc* y) {
  for (int64_t i = 0; i < n; ++i) y[i] *= alpha;
}

}  // namespace dualkv::detail::cpu
