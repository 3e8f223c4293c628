// The backward work plan against the mask definition of design section 2: key tiles and query
// tiles cover every token once, their costs are the query rows / key rows the mask makes a tile
// visit, both lists are heaviest first, and the device workspace stays within the memory budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cpu/batch_spec.h"
#include "cpu/oracle_dense_mask.h"
#include "dualkv/errors.h"
#include "dualkv/layout.h"
#include "host/backward_plan.h"

namespace dualkv::detail {
namespace {

using dualkv_test::BatchSpec;

Layout layout_of(const BatchSpec& batch) {
  std::vector<int64_t> prompts;
  std::vector<std::vector<int64_t>> responses;
  for (const auto& group : batch) {
    prompts.push_back(group.prompt);
    responses.push_back(group.responses);
  }
  return Layout::from_lengths(prompts, responses);
}

// Segments in packed order, recomputed from the lengths alone.
struct Segments {
  std::vector<int64_t> begin;  // one past the last segment holds T
  std::vector<int32_t> of_token;
  std::vector<int32_t> prompt_of;     // per segment: its group's prompt segment
  std::vector<int32_t> group_end_of;  // per segment: one past its group's last segment
};

Segments segments_of(const BatchSpec& batch) {
  Segments s;
  int64_t next = 0;
  auto add = [&](int64_t length, int32_t prompt, int32_t group_end) {
    s.begin.push_back(next);
    s.prompt_of.push_back(prompt);
    s.group_end_of.push_back(group_end);
    for (int64_t i = 0; i < length; ++i) s.of_token.push_back(static_cast<int32_t>(s.begin.size() - 1));
    next += length;
  };
  for (const auto& group : batch) {
    const auto prompt = static_cast<int32_t>(s.begin.size());
    const auto group_end = prompt + 1 + static_cast<int32_t>(group.responses.size());
    add(group.prompt, prompt, group_end);
    for (int64_t length : group.responses) add(length, prompt, group_end);
  }
  s.begin.push_back(next);
  return s;
}

// Tokens of the `block`-aligned tiles (clipped to their segment) that hold at least one token
// for which `touches(token)` is true.
template <typename Touches>
int64_t rows_of_touched_tiles(const Segments& segments, int block, Touches touches) {
  int64_t rows = 0;
  for (size_t s = 0; s + 1 < segments.begin.size(); ++s) {
    for (int64_t begin = segments.begin[s]; begin < segments.begin[s + 1]; begin += block) {
      const int64_t end = std::min<int64_t>(begin + block, segments.begin[s + 1]);
      bool touched = false;
      for (int64_t t = begin; t < end && !touched; ++t) touched = touches(t);
      if (touched) rows += end - begin;
    }
  }
  return rows;
}

void expect_tiles_cover_every_token_once(const std::vector<TileWork>& tiles, const Segments& segments, int block) {
  std::vector<int> covered(segments.of_token.size(), 0);
  for (const TileWork& tile : tiles) {
    const int64_t segment_begin = segments.begin[tile.segment];
    const int64_t segment_end = segments.begin[tile.segment + 1];
    ASSERT_GE(tile.begin, segment_begin);
    ASSERT_LT(tile.begin, segment_end);
    EXPECT_EQ((tile.begin - segment_begin) % block, 0) << "tiles align to their segment's start";
    EXPECT_EQ(segments.of_token[tile.begin], tile.segment);
    EXPECT_EQ(tile.prompt_segment, segments.prompt_of[tile.segment]);
    EXPECT_EQ(tile.group_end_segment, segments.group_end_of[tile.segment]);
    for (int64_t t = tile.begin; t < std::min<int64_t>(tile.begin + block, segment_end); ++t) ++covered[t];
  }
  for (size_t t = 0; t < covered.size(); ++t) EXPECT_EQ(covered[t], 1) << "token " << t;
}

void check_batch(const BatchSpec& batch, int key_block, int query_block) {
  const Layout layout = layout_of(batch);
  const Segments segments = segments_of(batch);
  const auto mask = dualkv_test::oracle::packed_mask(batch);
  const int64_t tokens = mask.size();

  const std::vector<TileWork> key_tiles = plan_key_tiles(layout, key_block, query_block);
  EXPECT_EQ(static_cast<int64_t>(key_tiles.size()), count_tiles(layout, key_block));
  expect_tiles_cover_every_token_once(key_tiles, segments, key_block);
  for (size_t i = 0; i < key_tiles.size(); ++i) {
    const TileWork& tile = key_tiles[i];
    const int64_t key_end = std::min<int64_t>(tile.begin + key_block, segments.begin[tile.segment + 1]);
    const int64_t expected = rows_of_touched_tiles(segments, query_block, [&](int64_t q) {
      for (int64_t k = tile.begin; k < key_end; ++k) {
        if (mask.visible(q, k)) return true;
      }
      return false;
    });
    EXPECT_EQ(key_tile_query_rows(layout, tile, query_block), expected) << "key tile at " << tile.begin;
    if (i > 0) {
      EXPECT_GE(key_tile_query_rows(layout, key_tiles[i - 1], query_block),
                key_tile_query_rows(layout, tile, query_block));
    }
  }

  const std::vector<TileWork> query_tiles = plan_query_tiles(layout, query_block);
  EXPECT_EQ(static_cast<int64_t>(query_tiles.size()), count_tiles(layout, query_block));
  expect_tiles_cover_every_token_once(query_tiles, segments, query_block);
  for (size_t i = 0; i < query_tiles.size(); ++i) {
    const TileWork& tile = query_tiles[i];
    const int64_t query_end = std::min<int64_t>(tile.begin + query_block, segments.begin[tile.segment + 1]);
    int64_t seen_keys = 0;
    for (int64_t k = 0; k < tokens; ++k) {
      bool seen = false;
      for (int64_t q = tile.begin; q < query_end && !seen; ++q) seen = mask.visible(q, k);
      seen_keys += seen;
    }
    EXPECT_EQ(query_tile_key_rows(layout, tile, query_block), seen_keys) << "query tile at " << tile.begin;
    if (i > 0) {
      EXPECT_GE(query_tile_key_rows(layout, query_tiles[i - 1], query_block),
                query_tile_key_rows(layout, tile, query_block));
    }
  }
}

TEST(BackwardPlan, TileShapesFitTheKernels) {
  for (const BackwardTileShape& shape : kBackwardTileShapes) {
    EXPECT_EQ(find_backward_tile_shape(shape.head_dim, shape.key_block, shape.query_block), &shape)
        << "one shape per kernel";
    EXPECT_TRUE(shape.query_stages == 1 || shape.query_stages == 2);
    EXPECT_EQ(shape.head_dim % 64, 0) << "head_dim tiles use the 128-byte swizzle atom";
    EXPECT_EQ(shape.key_block % shape.query_block, 0) << "query tiles line up with key tiles";
    // KV-major kernel: key_block / 16 warps in a (key_block / 32) x 2 grid shared by every GEMM
    // (key x query, key x d, query x d), each warp covering 16 x 16 per MMA tile.
    EXPECT_EQ(shape.key_block % 32, 0);
    EXPECT_LE(shape.key_block / 16, 16) << "at most 512 threads";
    EXPECT_EQ(shape.query_block % 32, 0) << "two warp columns over the query tile; 32- or 64-column score atom";
    EXPECT_LE(2 * shape.query_block, shape.key_block / 16 * 32) << "one thread per LSE and D value";
    EXPECT_EQ(shape.dq_query_block % 16, 0);
    EXPECT_EQ(shape.dq_key_block % 16, 0);
  }
  EXPECT_EQ(find_backward_tile_shape(96, 128, 64), nullptr);
  EXPECT_EQ(find_backward_tile_shape(128, 32, 32), nullptr);
}

TEST(BackwardPlan, TilesFollowTheMaskOnFixedBatches) {
  const std::vector<BatchSpec> batches = {
      {{1, {1}}},
      {{17, {5, 1, 70}}, {129, {1}}, {1, {130, 64, 3, 200}}},
      {{300, {100, 77, 1, 129, 64}}},
      {{128, {128, 128}}, {64, {64}}},
  };
  for (const BatchSpec& batch : batches) {
    for (const BackwardTileShape& shape : kBackwardTileShapes) {
      check_batch(batch, shape.key_block, shape.query_block);
      check_batch(batch, shape.dq_key_block, shape.dq_query_block);
    }
  }
}

TEST(BackwardPlan, TilesFollowTheMaskOnRandomBatches) {
  std::mt19937 rng(20261121);
  std::uniform_int_distribution<int64_t> groups(1, 3), responses(1, 5), length(1, 150);
  for (int trial = 0; trial < 20; ++trial) {
    BatchSpec batch;
    for (int64_t g = groups(rng); g > 0; --g) {
      dualkv_test::GroupLengths group{length(rng), {}};
      for (int64_t r = responses(rng); r > 0; --r) group.responses.push_back(length(rng));
      batch.push_back(group);
    }
    check_batch(batch, 32, 16);
    check_batch(batch, 128, 64);
  }
}

// Design section 4: peak memory <= 1.5x the bytes of Q, K, V, O, dO, dQ, dK, dV, so the
// workspace may add at most half of them. The bound holds while H / Hk stays below head_dim
// minus the plan's few bytes per token (see backward_plan.h); checked here up to H / Hk = 32.
TEST(BackwardPlan, WorkspaceStaysWithinHalfTheTensors) {
  const std::vector<BatchSpec> batches = {
      {{1, {1}}},
      {{1, std::vector<int64_t>(200, 1)}},  // one-token segments: the most tiles per token
      {{4096, std::vector<int64_t>(28, 2048)}},
      {{17, {5, 1, 70}}, {129, {1}}},
  };
  for (const BatchSpec& batch : batches) {
    const Layout layout = layout_of(batch);
    const double tokens = layout.total_tokens();
    for (const BackwardTileShape& shape : kBackwardTileShapes) {
      for (int64_t kv_heads : {1, 2, 8}) {
        for (int64_t group_size : {1, 4, 8, 32}) {
          const int64_t heads = kv_heads * group_size;
          const double tensor_bytes = tokens * (4.0 * heads + 4.0 * kv_heads) * shape.head_dim * 2 /*16-bit*/;
          for (bool deterministic : {false, true}) {
            const BackwardWorkspace ws = plan_backward_workspace(layout, heads, shape, deterministic);
            EXPECT_LE(static_cast<double>(ws.total_bytes), 0.5 * tensor_bytes)
                << "H=" << heads << " Hk=" << kv_heads << " d=" << shape.head_dim;
          }
        }
      }
    }
  }
}

TEST(BackwardPlan, WorkspaceRegionsAreAlignedAndDisjoint) {
  const Layout layout = layout_of({{17, {5, 1, 70}}, {129, {1}}});
  for (bool deterministic : {false, true}) {
    const int64_t heads = 4, head_dim = 64;
    const BackwardWorkspace ws =
        plan_backward_workspace(layout, heads, *find_backward_tile_shape(head_dim, 128, 64), deterministic);
    const size_t tokens = static_cast<size_t>(layout.total_tokens());
    EXPECT_EQ(ws.has_dq_accum, !deterministic);
    EXPECT_EQ(ws.num_query_tiles, deterministic ? count_tiles(layout, 64) : 0);
    struct Region {
      size_t offset, bytes;
    };
    std::vector<Region> regions = {
        {ws.delta_offset, tokens * heads * sizeof(float)},
        {ws.cu_seqlens_offset, layout.cu_seqlens().size() * sizeof(int32_t)},
        {ws.key_tiles_offset, static_cast<size_t>(ws.num_key_tiles) * sizeof(TileWork)},
        {ws.query_tiles_offset, static_cast<size_t>(ws.num_query_tiles) * sizeof(TileWork)},
    };
    if (ws.has_dq_accum) regions.push_back({ws.dq_accum_offset, tokens * heads * head_dim * sizeof(float)});
    for (size_t i = 0; i < regions.size(); ++i) {
      EXPECT_EQ(regions[i].offset % 16, 0u);
      EXPECT_LE(regions[i].offset + regions[i].bytes, ws.total_bytes);
      for (size_t j = 0; j < i; ++j) {
        const bool disjoint = regions[i].offset + regions[i].bytes <= regions[j].offset ||
                              regions[j].offset + regions[j].bytes <= regions[i].offset;
        EXPECT_TRUE(disjoint || regions[i].bytes == 0 || regions[j].bytes == 0) << i << " vs " << j;
      }
    }
  }
}

// Opt-in shared memory per block: H100/H200, A100, sm_86/sm_89.
constexpr size_t kHopperLimit = 232448, kA100Limit = 166912, kSm86Limit = 101376;

TEST(BackwardPlan, EveryGpuFromSm80GetsAShapeForEveryHeadDim) {
  for (const int64_t head_dim : {64, 128}) {
    for (const size_t limit : {kHopperLimit, kA100Limit, kSm86Limit}) {
      for (const bool deterministic : {false, true}) {
        const BackwardTileShape& shape = select_backward_tile_shape(head_dim, deterministic, limit, "limit");
        EXPECT_EQ(shape.head_dim, head_dim);
        EXPECT_LE(backward_shared_memory_bytes(shape, deterministic), limit) << "d=" << head_dim << " limit=" << limit;
        EXPECT_LE(backward_kv_shared_memory_bytes(shape), limit);
        if (deterministic) EXPECT_LE(backward_dq_shared_memory_bytes(shape), limit);
      }
    }
  }
}

TEST(BackwardPlan, TheFastestShapeThatFitsIsChosen) {
  // Head dim 128: 128 x 64 tiles, double-buffered (164864 bytes), where they fit; 128 x 32 tiles,
  // single-buffered (98560 bytes) on sm_86/sm_89.
  const BackwardTileShape& large = *find_backward_tile_shape(128, 128, 64);
  const BackwardTileShape& sm86 = *find_backward_tile_shape(128, 128, 32);
  for (const bool deterministic : {false, true}) {
    EXPECT_EQ(&select_backward_tile_shape(128, deterministic, kHopperLimit, "limit"), &large);
    EXPECT_EQ(&select_backward_tile_shape(128, deterministic, kA100Limit, "limit"), &large);
    EXPECT_EQ(&select_backward_tile_shape(128, deterministic, kSm86Limit, "limit"), &sm86);
    EXPECT_EQ(&select_backward_tile_shape(64, deterministic, kSm86Limit, "limit"),
              find_backward_tile_shape(64, 128, 64));
  }
  EXPECT_EQ(backward_kv_shared_memory_bytes(large), 164864u);
  EXPECT_EQ(&select_backward_tile_shape(128, false, backward_kv_shared_memory_bytes(large), "limit"), &large);
  EXPECT_NE(&select_backward_tile_shape(128, false, backward_kv_shared_memory_bytes(large) - 1, "limit"), &large);
}

TEST(BackwardPlan, ALimitNoShapeFitsIsAnErrorNamingTheLimit) {
  const BackwardTileShape& small = *find_backward_tile_shape(128, 128, 32);
  const size_t least = backward_shared_memory_bytes(small, true);
  EXPECT_EQ(least, backward_dq_shared_memory_bytes(small)) << "the deterministic dQ kernel is the larger one";
  try {
    select_backward_tile_shape(128, true, least - 1, "options.max_shared_memory_per_block");
    ADD_FAILURE() << "no head_dim 128 shape fits " << least - 1 << " bytes";
  } catch (const dualkv::Error& error) {
    EXPECT_EQ(error.argument(), "options.max_shared_memory_per_block");
    EXPECT_NE(std::string(error.rule()).find(std::to_string(least) + " bytes"), std::string::npos) << error.rule();
  }
  EXPECT_NO_THROW(select_backward_tile_shape(128, true, least, "limit"));
}

TEST(BackwardPlan, UncompiledHeadDimIsAnError) {
  try {
    select_backward_tile_shape(96, false, kHopperLimit, "limit");
    ADD_FAILURE() << "head_dim 96 is not compiled";
  } catch (const dualkv::Error& error) {
    EXPECT_EQ(error.argument(), "q.head_dim");
  }
}

}  // namespace
}  // namespace dualkv::detail
