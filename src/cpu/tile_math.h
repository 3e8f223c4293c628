// The inner loops of the CPU path, written so that they vectorise at -O3 without -ffast-math
// (no floating-point reduction is reordered, so results are bitwise reproducible):
//   - dot_tile: a kRowTile x kColumnTile block of dot products. The column operand is stored
//     dim-major (kColumnTile consecutive tokens per head-dim index), so the loop over head_dim
//     updates kRowTile x kColumnTile independent accumulators held in SIMD registers. Left to
//     itself the compiler vectorises along head_dim with gathers and spills the accumulators,
//     so the columns are spelled as GCC/Clang vector types of one 128-bit register each;
//   - add_weighted_rows: a weighted sum of up to kColumnTile consecutive staged rows added to an
//     output row, vectorised along the contiguous head dimension with the output held in a
//     register across the rows (one load and store of the output per tile, not per row);
//   - scale_in_place: element-wise along the head dimension.
#pragma once

#include <cstdint>
#include <cstring>

namespace dualkv::detail::cpu {

// 4 x 8 fp32 accumulators are eight 128-bit registers: with the two column loads and a
// broadcast they fit the sixteen registers of baseline x86-64 (and of AArch64 NEON's 32).
inline constexpr int kRowTile = 4;
inline constexpr int kColumnTile = 8;

// Column tiles start at multiples of kColumnTile (see StagedHead::column_tile).
inline int64_t align_down(int64_t token) { return token - token % kColumnTile; }

template <typename Acc>
using ScoreTile = Acc[kRowTile][kColumnTile];

// One 128-bit register of Acc lanes.
template <typename Acc>
struct Simd {
  static constexpr int kBytes = 16;
  static constexpr int kLanes = kBytes / static_cast<int>(sizeof(Acc));
  typedef Acc Vector __attribute__((vector_size(kBytes)));
};

// tile[r][c] = sum_i rows[r][i] * columns[i * column_stride + c], summed in increasing i.
template <typename Acc>
inline void dot_tile(const Acc* const (&rows)[kRowTile], const Acc* columns, int64_t column_stride, int64_t head_dim,
                     ScoreTile<Acc>& tile) {
  using Vector = typename Simd<Acc>::Vector;
  constexpr int kLanes = Simd<Acc>::kLanes;
  constexpr int kVectors = kColumnTile / kLanes;
  static_assert(kColumnTile % kLanes == 0, "a column tile is a whole number of registers");
  Vector acc[kRowTile][kVectors] = {};
  for (int64_t i = 0; i < head_dim; ++i) {
    Vector column[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      std::memcpy(&column[v], columns + i * column_stride + v * kLanes, sizeof(Vector));  // unaligned load
    }
    for (int r = 0; r < kRowTile; ++r) {
      const Acc a = rows[r][i];
      for (int v = 0; v < kVectors; ++v) acc[r][v] += a * column[v];
    }
  }
  for (int r = 0; r < kRowTile; ++r) {
    for (int v = 0; v < kVectors; ++v) {
      for (int l = 0; l < kLanes; ++l) tile[r][v * kLanes + l] = acc[r][v][l];
    }
  }
}

// out[i] += sum_{c < count} weights[c] * rows[c * row_stride + i] for i < n, summed in increasing c.
template <typename Acc>
inline void add_weighted_rows(const Acc* weights, int count, const Acc* rows, int64_t row_stride, int64_t n, Acc* out) {
  using Vector = typename Simd<Acc>::Vector;
  constexpr int kLanes = Simd<Acc>::kLanes;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Vector acc;
    std::memcpy(&acc, out + i, sizeof acc);
    for (int c = 0; c < count; ++c) {
      Vector row;
      std::memcpy(&row, rows + c * row_stride + i, sizeof row);
      acc += weights[c] * row;
    }
    std::memcpy(out + i, &acc, sizeof acc);
  }
  for (; i < n; ++i) {
    Acc acc = out[i];
    for (int c = 0; c < count; ++c) acc += weights[c] * rows[c * row_stride + i];
    out[i] = acc;
  }
}

template <typename Acc>
inline void scale_in_place(Acc alpha, int64_t n, Acc* y) {
  for (int64_t i = 0; i < n; ++i) y[i] *= alpha;
}

}  // namespace dualkv::detail::cpu
