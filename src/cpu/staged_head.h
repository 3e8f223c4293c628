// One head of a (tokens, heads, head_dim) input, converted to the accumulator type and laid out
// for the inner loops of tile_math.h:
//   - rows: token-major, the operands of add_weighted_rows and the row side of dot_tile;
//   - column tiles: for each aligned run of kColumnTile tokens, a head_dim x kColumnTile panel
//     (dim-major inside the panel), the column side of dot_tile. A tile is one contiguous block,
//     so walking a key range streams through memory instead of touching head_dim distant cache
//     lines (and pages) per tile.
// Holding one head at a time keeps scratch at O(tokens * head_dim), never O(N * P).
#pragma once

#include <cstdint>
#include <vector>

#include "cpu/gather.h"
#include "cpu/tile_math.h"
#include "dualkv/tensor.h"

namespace dualkv::detail::cpu {

enum class Copies { kRows, kColumnTiles, kBoth };

template <typename Acc>
class StagedHead {
 public:
  StagedHead(int64_t tokens, int64_t head_dim, Copies copies) : head_dim_(head_dim) {
    if (copies != Copies::kColumnTiles) rows_.resize(static_cast<size_t>(tokens * head_dim));
    // The last panel is padded with zero columns past the final token.
    const int64_t padded_tokens = align_down(tokens + kColumnTile - 1);
    if (copies != Copies::kRows) column_tiles_.assign(static_cast<size_t>(padded_tokens * head_dim), Acc(0));
  }

  // Converts tokens [begin, end) of `head`; disjoint token ranges may be loaded concurrently if
  // they are also disjoint in whole column tiles (begin and end multiples of kColumnTile, or the end).
  void load(const InputTensor& tensor, int64_t head, int64_t begin, int64_t end) {
    std::vector<Acc> scratch(rows_.empty() ? static_cast<size_t>(head_dim_) : 0);
    for (int64_t t = begin; t < end; ++t) {
      Acc* row = rows_.empty() ? scratch.data() : rows_.data() + t * head_dim_;
      load_row(tensor, t, head, row);
      if (column_tiles_.empty()) continue;
      Acc* panel = column_tiles_.data() + align_down(t) * head_dim_ + (t - align_down(t));
      for (int64_t i = 0; i < head_dim_; ++i) panel[i * kColumnTile] = row[i];
    }
  }

  const Acc* row(int64_t token) const { return rows_.data() + token * head_dim_; }

  // The tile of tokens [token, token + kColumnTile) for dot_tile, with column stride kColumnTile:
  // element (token + c, dim i) is at column_tile(token)[i * kColumnTile + c].
  const Acc* column_tile(int64_t token) const { return column_tiles_.data() + token * head_dim_; }

 private:
  int64_t head_dim_;
  std::vector<Acc> rows_;
  std::vector<Acc> column_tiles_;  // precondition of column_tile(): token % kColumnTile == 0
};

// Row pointers of tokens first .. first + kRowTile - 1 for dot_tile. Positions past `count`
// repeat the last real row, so a partial tile never reads past the tensor (its extra results are
// discarded by the caller).
template <typename Acc>
void tile_rows(const StagedHead<Acc>& head, int64_t first, int count, const Acc* (&rows)[kRowTile]) {
  for (int r = 0; r < kRowTile; ++r) rows[r] = head.row(first + (r < count ? r : count - 1));
}

}  // namespace dualkv::detail::cpu
