#include "host/work_plan.h"

#include <algorithm>

namespace dualkv::detail {
namespace {

int64_t tiles_in(int32_t length, int block_m) { return (static_cast<int64_t>(length) + block_m - 1) / block_m; }

}  // namespace

int64_t count_forward_tiles(const Layout& layout, int block_m) {
  int64_t tiles = 0;
  for (int32_t s = 0; s < layout.num_segments(); ++s) {
    tiles += tiles_in(layout.segment_end(s) - layout.segment_begin(s), block_m);
  }
  return tiles;
}

std::vector<ForwardTile> plan_forward_tiles(const Layout& layout, int block_m) {
  std::vector<ForwardTile> tiles;
  tiles.reserve(static_cast<size_t>(count_forward_tiles(layout, block_m)));
  for (int32_t g = 0; g < layout.num_groups(); ++g) {
    const int32_t prompt = layout.prompt_segment(g);
    for (int32_t s = prompt; s < layout.cu_groups()[g + 1]; ++s) {
      const int32_t begin = layout.segment_begin(s);
      const int32_t end = layout.segment_end(s);
      // A prompt's own causal range already covers the prompt, so it reads no separate prompt range.
      const int32_t prompt_begin = s == prompt ? begin : layout.prompt_begin(g);
      const int32_t prompt_end = s == prompt ? begin : layout.prompt_end(g);
      for (int64_t q = begin; q < end; q += block_m) {
        const int32_t q_end = static_cast<int32_t>(std::min<int64_t>(q + block_m, end));
        tiles.push_back({static_cast<int32_t>(q), q_end, prompt_begin, prompt_end, begin});
      }
    }
  }
  std::stable_sort(tiles.begin(), tiles.end(), [](const ForwardTile& a, const ForwardTile& b) {
    return forward_tile_keys(a) > forward_tile_keys(b);
  });
  return tiles;
}

}  // namespace dualkv::detail
