#include "host/backward_plan.h"

#include <algorithm>
#include <tuple>

namespace dualkv::detail {
namespace {

// 16 bytes: the widest access any kernel makes to a workspace region (float4 on dq_accum).
constexpr size_t kRegionAlignment = 16;

size_t align_up(size_t bytes) { return (bytes + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment; }

// The first token of the `block`-aligned tile of segment `segment` that holds `token`.
int32_t tile_begin_of(const Layout& layout, int32_t segment, int32_t token, int block) {
  const int32_t segment_begin = layout.segment_begin(segment);
  return segment_begin + (token - segment_begin) / block * block;
}

// Every `block`-token tile of every segment, in packed order.
std::vector<TileWork> tiles_in_packed_order(const Layout& layout, int block) {
  std::vector<TileWork> tiles;
  tiles.reserve(static_cast<size_t>(count_tiles(layout, block)));
  for (int32_t g = 0; g < layout.num_groups(); ++g) {
    const int32_t prompt_segment = layout.prompt_segment(g);
    const int32_t group_end_segment = layout.cu_groups()[g + 1];
    for (int32_t s = prompt_segment; s < group_end_segment; ++s) {
      for (int64_t begin = layout.segment_begin(s); begin < layout.segment_end(s); begin += block) {
        tiles.push_back({static_cast<int32_t>(begin), s, prompt_segment, group_end_segment});
      }
    }
  }
  return tiles;
}

template <typename Cost>
void sort_heaviest_first(std::vector<TileWork>& tiles, Cost cost) {
  std::stable_sort(tiles.begin(), tiles.end(), [&](const TileWork& a, const TileWork& b) { return cost(a) > cost(b); });
}

}  // namespace

int64_t key_tile_query_rows(const Layout& layout, const TileWork& tile, int query_block) {
  const int32_t first_query = tile_begin_of(layout, tile.segment, tile.begin, query_block);
  if (tile.segment != tile.prompt_segment) return layout.segment_end(tile.segment) - first_query;
  const int64_t prompt_rows = layout.segment_end(tile.segment) - first_query;
  const int64_t response_rows = layout.segment_begin(tile.group_end_segment) - layout.segment_end(tile.prompt_segment);
  return prompt_rows + response_rows;
}

int64_t query_tile_key_rows(const Layout& layout, const TileWork& tile, int query_block) {
  const int64_t last_query_end = std::min<int64_t>(int64_t{tile.begin} + query_block, layout.segment_end(tile.segment));
  const int64_t own_rows = last_query_end - layout.segment_begin(tile.segment);
  if (tile.segment == tile.prompt_segment) return own_rows;
  const int64_t prompt_rows = layout.segment_end(tile.prompt_segment) - layout.segment_begin(tile.prompt_segment);
  return prompt_rows + own_rows;
}

std::vector<TileWork> plan_key_tiles(const Layout& layout, int key_block, int query_block) {
  std::vector<TileWork> tiles = tiles_in_packed_order(layout, key_block);
  const auto rows = [&](const TileWork& t) { return key_tile_query_rows(layout, t, query_block); };
  // A response's key tiles are one unit, weighed by its heaviest (first) tile: they read the same
  // query rows and add into the same dQ rows, so running them together keeps those rows in L2.
  const auto unit_rows = [&](const TileWork& t) {
    if (t.segment == t.prompt_segment) return rows(t);
    return rows(TileWork{layout.segment_begin(t.segment), t.segment, t.prompt_segment, t.group_end_segment});
  };
  // Units heaviest first; a unit's tiles together (segment ascending), heaviest first inside.
  sort_heaviest_first(tiles, [&](const TileWork& t) { return std::tuple(unit_rows(t), -t.segment, rows(t)); });
  return tiles;
}

std::vector<TileWork> plan_query_tiles(const Layout& layout, int query_block) {
  std::vector<TileWork> tiles = tiles_in_packed_order(layout, query_block);
  sort_heaviest_first(tiles, [&](const TileWork& t) { return query_tile_key_rows(layout, t, query_block); });
  return tiles;
}

int64_t count_tiles(const Layout& layout, int block) {
  int64_t tiles = 0;
  for (int32_t s = 0; s < layout.num_segments(); ++s) {
    const int64_t length = layout.segment_end(s) - layout.segment_begin(s);
    tiles += (length + block - 1) / block;
  }
  return tiles;
}

PlanImage backward_plan_image(const Layout& layout, int key_block, int query_block, int dq_query_block) {
  PlanImage image;
  image.append(layout.cu_seqlens());
  image.append(plan_key_tiles(layout, key_block, query_block));
  image.append(dq_query_block > 0 ? plan_query_tiles(layout, dq_query_block) : std::vector<TileWork>{});
  image.append(layout.cu_groups());
  return image;
}

BackwardWorkspace plan_backward_workspace(int64_t tokens, int64_t dq_accum_rows, int64_t heads, int64_t head_dim,
                                          bool deterministic, bool stores_lse_log2) {
  BackwardWorkspace ws;
  ws.has_dq_accum = !deterministic;
  ws.has_lse_log2 = stores_lse_log2;
  ws.stats_row_stride = (tokens + 3) / 4 * 4;
  const auto stats_bytes = static_cast<size_t>(heads * ws.stats_row_stride) * sizeof(float);
  size_t offset = 0;
  ws.dq_accum_offset = offset;
  if (ws.has_dq_accum) offset += align_up(static_cast<size_t>(dq_accum_rows * heads * head_dim) * sizeof(float));
  ws.delta_offset = offset;
  offset += align_up(stats_bytes);
  ws.lse_log2_offset = offset;
  if (ws.has_lse_log2) offset += align_up(stats_bytes + kStatsReadSlack * sizeof(float));
  ws.total_bytes = offset;
  return ws;
}

}  // namespace dualkv::detail
