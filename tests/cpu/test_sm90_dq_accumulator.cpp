// The Hopper backward's dQ accumulator geometry (src/cuda/sm90/backward/dq_accumulator.h), which
// the KV kernel adds into and the convert pass reads back: the register order of a warpgroup
// block against the wgmma accumulator layout, slots of query tiles against layouts recomputed from
// their lengths and groups, replayed over every key tile's walk, and the token-to-segment and
// segment-to-run searches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "cuda/sm90/backward/dq_accumulator.h"

namespace dualkv::detail::sm90 {
namespace {

// wgmma m64nNk16 fp32 accumulator: value 4 j + 2 h + e of warpgroup thread t sits at row
// 16 (t / 32) + (t % 32) / 4 + 8 h, column 8 j + 2 (t % 4) + e (PTX ISA, "wgmma D fragment").
struct Position {
  int row, column;
};
Position accumulator_position(int thread, int value) {
  const int j = value / 4, h = value % 4 / 2, e = value % 2;
  return {16 * (thread / 32) + thread % 32 / 4 + 8 * h, 8 * j + 2 * (thread % 4) + e};
}

TEST(Sm90DqAccumulator, BlockOrderIsTheAccumulatorsRegisterOrder) {
  std::set<int> offsets;
  for (int thread = 0; thread < 128; ++thread) {
    for (int value = 0; value < 32; ++value) {
      const Position at = accumulator_position(thread, value);
      const int offset = dq_fragment_offset(thread, value);
      EXPECT_EQ(dq_fragment_offset_at(at.row, at.column), offset) << "thread " << thread << " value " << value;
      EXPECT_GE(offset, 0);
      EXPECT_LT(offset, kDqBlockFloats);
      offsets.insert(offset);
    }
  }
  EXPECT_EQ(offsets.size(), static_cast<size_t>(kDqBlockFloats));  // every float of the block exactly once
}

// What makes the kernel's reductions cheap: one reduction of 4 consecutive values per thread, and
// a warp's 32 reductions of the same values one contiguous 512-byte run.
TEST(Sm90DqAccumulator, AWarpsReductionIsOneContiguousRun) {
  for (int warp = 0; warp < 4; ++warp) {
    for (int first_value = 0; first_value < 32; first_value += 4) {
      const int start = dq_fragment_offset(32 * warp, first_value);
      for (int lane = 0; lane < 32; ++lane) {
        for (int k = 0; k < 4; ++k) {
          EXPECT_EQ(dq_fragment_offset(32 * warp + lane, first_value + k), start + 4 * lane + k);
        }
      }
      EXPECT_EQ(start % 128, 0);  // 512-byte aligned within the block
    }
  }
}

// Segment starts of a layout given by its segment lengths; one past the last holds the tokens.
std::vector<int32_t> offsets_of(const std::vector<int32_t>& lengths) {
  std::vector<int32_t> offsets{0};
  for (const int32_t length : lengths) offsets.push_back(offsets.back() + length);
  return offsets;
}

std::vector<std::vector<int32_t>> segment_length_cases() {
  std::vector<std::vector<int32_t>> cases = {
      {1},           {17, 5, 1, 70, 129, 1}, std::vector<int32_t>(200, 1), {4096, 2048, 2048, 2048},
      {64, 64, 128}, {63, 65, 127}};
  std::mt19937 rng(20261123);
  std::uniform_int_distribution<int32_t> segments(1, 40), length(1, 700);
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<int32_t> lengths(segments(rng));
    for (int32_t& l : lengths) l = length(rng);
    cases.push_back(lengths);
  }
  return cases;
}

// Groups over a case's segments: group g owns segments [groups[g], groups[g + 1]), the first of
// them its prompt. The first case of each layout is one group per segment (prompts only), the
// second one group of everything, the third groups of 1 to 5 segments.
std::vector<std::vector<int32_t>> group_cases(int segments) {
  std::vector<int32_t> singles, whole{0, segments}, mixed{0};
  for (int s = 0; s <= segments; ++s) singles.push_back(s);
  std::mt19937 rng(static_cast<uint32_t>(segments));
  std::uniform_int_distribution<int> size(1, 5);
  while (mixed.back() < segments) mixed.push_back(std::min(segments, mixed.back() + size(rng)));
  return {singles, whole, mixed};
}

// The runs of a layout as [begin, end) token ranges with their first segment: each group's
// prompt, then its responses together (none if it has no responses).
struct QueryRun {
  int first_segment, begin, end;
};
std::vector<QueryRun> runs_of(const std::vector<int32_t>& offsets, const std::vector<int32_t>& groups) {
  std::vector<QueryRun> runs;
  for (size_t g = 0; g + 1 < groups.size(); ++g) {
    const int prompt = groups[g];
    runs.push_back({prompt, offsets[prompt], offsets[prompt + 1]});
    if (groups[g + 1] > prompt + 1) runs.push_back({prompt + 1, offsets[prompt + 1], offsets[groups[g + 1]]});
  }
  return runs;
}

// The key tiles of a layout in tiles of `block` keys, each with its group, as the host plan lays
// them.
std::vector<TileWork> key_tiles_of(const std::vector<int32_t>& offsets, const std::vector<int32_t>& groups, int block) {
  std::vector<TileWork> tiles;
  for (size_t g = 0; g + 1 < groups.size(); ++g) {
    for (int segment = groups[g]; segment < groups[g + 1]; ++segment) {
      for (int begin = offsets[segment]; begin < offsets[segment + 1]; begin += block) {
        tiles.push_back({begin, segment, groups[g], groups[g + 1]});
      }
    }
  }
  return tiles;
}

// Every key tile's walk adds whole blocks into the slots dq_step_slot picks; a row outside the
// step's queries may carry NaN. Replayed over random layouts and groupings: the convert pass's
// slots for a token hold every contribution to that token exactly once, nobody else's, and no
// row outside a step's queries; every slot lies inside the planned ones, which add at most
// 2 block_m rows per segment.
TEST(Sm90DqAccumulator, ATokensSlotsHoldEachOfItsContributionsOnceAndNoForeignRow) {
  struct Cell {
    std::vector<int> tokens;  // the token of each contribution added here
    bool foreign = false;     // a row outside its step's queries was added here
  };
  for (const std::vector<int32_t>& lengths : segment_length_cases()) {
    const std::vector<int32_t> offsets = offsets_of(lengths);
    const auto segments = static_cast<int>(lengths.size());
    const int tokens = offsets.back();
    for (const std::vector<int32_t>& groups : group_cases(segments)) {
      const auto group_count = static_cast<int>(groups.size()) - 1;
      for (const int block_m : {64, 128}) {
        const int64_t slots = dq_accumulator_slots(tokens, segments, block_m);
        EXPECT_LE(slots * block_m, tokens + block_m * (2 * segments + 1));
        const int64_t tail_slots_begin = dq_tail_slots_begin(tokens, segments, block_m);
        std::map<std::pair<int64_t, int>, Cell> cells;
        std::vector<int> contributions(tokens, 0);
        for (const TileWork& key_tile : key_tiles_of(offsets, groups, 128)) {
          const QueryWalk walk = QueryWalk::of_key_tile(offsets.data(), key_tile, 0, 1, block_m);
          SegmentCursor tile_segments{offsets.data()};
          for (QueryStep step = walk.first; !walk.done(step); walk.advance(step)) {
            const int64_t slot = dq_step_slot(step, key_tile, tile_segments, tail_slots_begin, block_m);
            ASSERT_GE(slot, 0);
            ASSERT_LT(slot, slots) << "key tile at " << key_tile.begin << ", step at " << step.begin;
            for (int row = 0; row < block_m; ++row) {
              const int token = step.begin + row;
              Cell& cell = cells[{slot, row}];
              if (token >= step.rows_begin && token < step.rows_end) {
                cell.tokens.push_back(token);
                ++contributions[token];
              } else {
                cell.foreign = true;
              }
            }
          }
        }
        for (int token = 0; token < tokens; ++token) {
          const DqRowSlots read =
              dq_row_slots(offsets.data(), segments, groups.data(), group_count, token, tail_slots_begin, block_m);
          ASSERT_NE(read.own_slot, read.tile_slot);
          // The tile's tokens are the run's [tile_begin, tile_end), each naming the same tile.
          ASSERT_LE(read.tile_begin, token);
          ASSERT_LT(token, read.tile_end);
          ASSERT_LE(read.tile_end - read.tile_begin, block_m);
          if (token + 1 < tokens) {
            const DqRowSlots next = dq_row_slots(offsets.data(), segments, groups.data(), group_count, token + 1,
                                                 tail_slots_begin, block_m);
            ASSERT_EQ(next.tile_begin == read.tile_begin, token + 1 < read.tile_end) << "token " << token;
          }
          // The convert pass derives the own slot of the row 8 further from this row's slots.
          if (token + 8 < read.tile_end) {
            const DqRowSlots later = dq_row_slots(offsets.data(), segments, groups.data(), group_count, token + 8,
                                                  tail_slots_begin, block_m);
            ASSERT_EQ(dq_own_slot_of_later_row(offsets.data(), read, token + 8, block_m), later.own_slot)
                << "token " << token;
          }
          int collected = 0;
          for (const int64_t slot : {read.tile_slot, read.own_slot}) {
            if (slot < 0) continue;
            const auto cell = cells.find({slot, token - read.tile_begin});
            if (cell == cells.end()) continue;
            ASSERT_FALSE(cell->second.foreign) << "token " << token << " reads a foreign row of slot " << slot;
            for (const int added : cell->second.tokens) ASSERT_EQ(added, token) << "slot " << slot;
            collected += static_cast<int>(cell->second.tokens.size());
          }
          ASSERT_EQ(collected, contributions[token]) << "token " << token << ", block " << block_m;
          ASSERT_GT(collected, 0) << "token " << token;  // every token sees its own key tile at least
        }
      }
    }
  }
}

// The dQ warp's segment search over a walk's tile starts (ascending in a run, then starting over
// at a run's first segment, as for the next leg or head) agrees with the binary search.
TEST(Sm90DqAccumulator, SegmentCursorFollowsAWalk) {
  for (const std::vector<int32_t>& lengths : segment_length_cases()) {
    const std::vector<int32_t> offsets = offsets_of(lengths);
    const auto segments = static_cast<int>(lengths.size());
    for (const std::vector<int32_t>& groups : group_cases(segments)) {
      const std::vector<QueryRun> runs = runs_of(offsets, groups);
      SegmentCursor cursor{offsets.data()};
      for (int pass = 0; pass < 2; ++pass) {
        for (const QueryRun& run : runs) {
          for (int begin = run.begin; begin < run.end; begin += 64) {
            ASSERT_EQ(cursor.at(begin, run.first_segment), segment_of_token(offsets.data(), segments, begin))
                << "pass " << pass << " token " << begin;
          }
        }
      }
    }
  }
}

// Each segment's run, as the walk lays them.
TEST(Sm90DqAccumulator, RunOfEverySegment) {
  for (const std::vector<int32_t>& lengths : segment_length_cases()) {
    const std::vector<int32_t> offsets = offsets_of(lengths);
    const auto segments = static_cast<int>(lengths.size());
    for (const std::vector<int32_t>& groups : group_cases(segments)) {
      const auto group_count = static_cast<int>(groups.size()) - 1;
      const std::vector<QueryRun> runs = runs_of(offsets, groups);
      for (size_t r = 0; r < runs.size(); ++r) {
        const int end_segment = r + 1 < runs.size() ? runs[r + 1].first_segment : segments;
        for (int segment = runs[r].first_segment; segment < end_segment; ++segment) {
          const SegmentRange run = run_of_segment(groups.data(), group_count, segment);
          ASSERT_EQ(run.begin, runs[r].first_segment) << "segment " << segment;
          ASSERT_EQ(run.end, end_segment) << "segment " << segment;
        }
      }
    }
  }
}

TEST(Sm90DqAccumulator, SegmentOfEveryToken) {
  for (const std::vector<int32_t>& lengths : segment_length_cases()) {
    const std::vector<int32_t> offsets = offsets_of(lengths);
    const auto segments = static_cast<int>(lengths.size());
    int segment = 0;
    for (int token = 0; token < offsets.back(); ++token) {
      while (token >= offsets[segment + 1]) ++segment;
      ASSERT_EQ(segment_of_token(offsets.data(), segments, token), segment) << "token " << token;
    }
  }
}

}  // namespace
}  // namespace dualkv::detail::sm90
