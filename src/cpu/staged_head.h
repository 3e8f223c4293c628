// One head of a (tokens, heads, head_dim) input, converted to the accumulator type and laid out
// for the inner loops of tile_math.h: token-major rows (operands of add_scaled and the row side
// of dot_tile) and/or a dim-major copy (the column side of dot_tile). Holding one head at a time
// keeps scratch at O(tokens * head_dim), never O(N * P).
#pragma once

#include <cstdint>
#include <vector>

#include "cpu/gather.h"
#include "cpu/tile_math.h"
#include "dualkv/tensor.h"

namespace dualkv::detail::cpu {

enum class Copies { kRows, kColumns, kBoth };

template <typename Acc>
class StagedHead {
 public:
  StagedHead(int64_t tokens, int64_t head_dim, Copies copies)
      : head_dim_(head_dim),
        // A column tile may start at any token, so kColumnTile - 1 zero columns follow the last one.
        column_stride_(tokens + kColumnTile - 1) {
    if (copies != Copies::kColumns) rows_.resize(static_cast<size_t>(tokens * head_dim));
    if (copies != Copies::kRows) columns_.assign(static_cast<size_t>(head_dim * column_stride_), Acc(0));
  }

  // Converts tokens [begin, end) of `head`; disjoint token ranges may be loaded concurrently.
  void load(const InputTensor& tensor, int64_t head, int64_t begin, int64_t end) {
    std::vector<Acc> scratch(rows_.empty() ? static_cast<size_t>(head_dim_) : 0);
    for (int64_t t = begin; t < end; ++t) {
      Acc* row = rows_.empty() ? scratch.data() : rows_.data() + t * head_dim_;
      load_row(tensor, t, head, row);
      if (columns_.empty()) continue;
      for (int64_t i = 0; i < head_dim_; ++i) columns_[static_cast<size_t>(i * column_stride_ + t)] = row[i];
    }
  }

  const Acc* row(int64_t token) const { return rows_.data() + token * head_dim_; }
  // Element (token + c, dim i) is at columns(token)[i * column_stride() + c].
  const Acc* columns(int64_t token) const { return columns_.data() + token; }
  int64_t column_stride() const { return column_stride_; }

 private:
  int64_t head_dim_;
  int64_t column_stride_;
  std::vector<Acc> rows_;
  std::vector<Acc> columns_;
};

// Row pointers of tokens first .. first + kRowTile - 1 for dot_tile. Positions past `count`
// repeat the last real row, so a partial tile never reads past the tensor (its extra results are
// discarded by the caller).
template <typename Acc>
void tile_rows(const StagedHead<Acc>& head, int64_t first, int count, const Acc* (&rows)[kRowTile]) {
  for (int r = 0; r < kRowTile; ++r) rows[r] = head.row(first + (r < count ? r : count - 1));
}

}  // namespace dualkv::detail::cpu
