// The order in which a block meets the operand it streams, and which entries of each tile the
// mask keeps. Shared by the forward pass and both gradients so that visibility is decided in one
// place (on top of the ranges of visible_ranges.h).
//
// A query block (forward pass, dQ) streams its key ranges; a key block (dK/dV) streams the
// queries that see it. The streamed range is cut into chunks of kStreamChunk tokens and each
// chunk meets every kRowTile-row tile of the block before the next chunk is touched, in
// kColumnTile steps aligned to the column tiles of StagedHead. Steps come in increasing streamed
// token order for every row, which fixes each output's summation order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/tile_math.h"
#include "cpu/visible_ranges.h"
#include "cpu/work_shape.h"

namespace dualkv::detail::cpu {

// kRowTile queries from first_query against the aligned key tile starting at `key`.
struct QueryTileStep {
  int32_t first_query;
  int rows;  // real rows of the tile (the last tile of a block may be partial)
  int32_t key;
  int column_begin;   // columns before it lie before the key range
  int32_t range_end;  // keys at or after it are outside the key range

  // One past the last column row r sees: inside the key range and, causally, not after its query.
  int column_end(int r) const { return std::min({kColumnTile, range_end - key, first_query + r + 1 - key}); }
};

template <typename Visit>
void walk_query_block(const std::vector<TokenRange>& ranges, const TokenBlock& block, Visit&& visit) {
  for (const TokenRange& range : ranges) {
    // Causality: no query of the block sees a key past the block's last query.
    const int32_t range_end = std::min(range.end, block.end);
    for (int32_t chunk = static_cast<int32_t>(align_down(range.begin)); chunk < range_end; chunk += kStreamChunk) {
      for (int32_t first = block.begin; first < block.end; first += kRowTile) {
        const int rows = std::min<int32_t>(kRowTile, block.end - first);
        const int32_t key_end = std::min({range_end, first + rows, chunk + kStreamChunk});
        for (int32_t key = chunk; key < key_end; key += kColumnTile) {
          visit(QueryTileStep{first, rows, key, std::max(0, range.begin - key), range_end});
        }
      }
    }
  }
}

// kRowTile keys from first_key against the aligned query tile starting at `query`.
struct KeyTileStep {
  int32_t first_key;
  int rows;  // real rows of the tile (the last tile of a block may be partial)
  int32_t query;
  int first_column;  // columns before it lie before the query range
  int column_end;    // columns at or after it are outside the query range

  // The first column that sees row r: inside the query range and, causally, at or after the key.
  int column_begin(int r) const { return std::max(first_column, first_key + r - query); }
};

template <typename Visit>
void walk_key_block(const std::vector<TokenRange>& ranges, const TokenBlock& block, Visit&& visit) {
  for (const TokenRange& queries : ranges) {
    for (int32_t chunk = static_cast<int32_t>(align_down(queries.begin)); chunk < queries.end; chunk += kStreamChunk) {
      const int32_t chunk_end = std::min(queries.end, chunk + kStreamChunk);
      for (int32_t first = block.begin; first < block.end; first += kRowTile) {
        const int rows = std::min<int32_t>(kRowTile, block.end - first);
        // Queries before the row tile's first key see none of its keys.
        for (int32_t query = std::max(chunk, static_cast<int32_t>(align_down(first))); query < chunk_end;
             query += kColumnTile) {
          visit(KeyTileStep{first, rows, query, std::max(0, queries.begin - query),
                            std::min(kColumnTile, chunk_end - query)});
        }
      }
    }
  }
}

}  // namespace dualkv::detail::cpu
