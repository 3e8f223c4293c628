// The Hopper backward's dQ accumulator geometry (src/cuda/sm90/backward/dq_accumulator.h), which
// the KV kernel adds into and the convert pass reads back: the register order of a warpgroup
// block against the wgmma accumulator layout, slots of query tiles replayed over every key tile's
// walk on two-level layouts and trees (packed depth-first and otherwise), the producer's hand-over
// of each next step and its slot (step_hand_over.h), and the token-to-segment and segment-to-run
// searches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "cuda/sm90/backward/dq_accumulator.h"
#include "cuda/sm90/backward/step_hand_over.h"
#include "dualkv/layout.h"
#include "host/backward_plan.h"

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

// Parents over a case's segments: every segment a root; one two-level group of everything; two-level
// groups of 1 to 5 segments; a random tree packed depth-first (each parent on the path to the
// previous segment); a random tree in any order that keeps parents first.
std::vector<std::vector<int64_t>> parent_cases(int segments) {
  std::vector<int64_t> roots(segments, -1), whole(segments, 0), groups, depth_first, any_order;
  whole[0] = -1;
  std::mt19937 rng(static_cast<uint32_t>(segments));
  std::uniform_int_distribution<int> size(1, 5);
  while (static_cast<int>(groups.size()) < segments) {
    const auto prompt = static_cast<int64_t>(groups.size());
    groups.push_back(-1);
    for (int r = size(rng); r > 1 && static_cast<int>(groups.size()) < segments; --r) groups.push_back(prompt);
  }
  std::vector<int64_t> path;  // the previous segment and its ancestors
  for (int s = 0; s < segments; ++s) {
    std::uniform_int_distribution<size_t> keep(0, path.size());
    path.resize(keep(rng));
    depth_first.push_back(path.empty() ? -1 : path.back());
    path.push_back(s);
    std::uniform_int_distribution<int64_t> parent(-1, s - 1);
    any_order.push_back(parent(rng));
  }
  return {roots, whole, groups, depth_first, any_order};
}

// Every key tile's walk adds whole blocks into the slots dq_step_slot picks; a row outside the
// step's queries may carry NaN. Replayed over random layouts and trees: the convert pass's
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
    for (const std::vector<int64_t>& parents : parent_cases(segments)) {
      const Layout layout = Layout::from_tree(parents, std::vector<int64_t>(lengths.begin(), lengths.end()));
      const BackwardRuns runs = plan_runs(layout);
      const auto run_count = static_cast<int>(runs.cu_runs.size()) - 1;
      for (const int block_m : {64, 128}) {
        const int64_t slots = dq_accumulator_slots(tokens, segments, block_m);
        EXPECT_LE(slots * block_m, tokens + block_m * (2 * segments + 1));
        const int64_t tail_slots_begin = dq_tail_slots_begin(tokens, segments, block_m);
        std::map<std::pair<int64_t, int>, Cell> cells;
        std::vector<int> contributions(tokens, 0);
        for (const TileWork& key_tile : plan_key_tiles(layout, runs, 128, block_m)) {
          const QueryWalk walk = QueryWalk::of_key_tile(offsets.data(), runs.table.data(), key_tile, 0, 1, block_m);
          SegmentCursor tile_segments{offsets.data()};
          for (QueryStep step = walk.first; !walk.done(step); walk.advance(step)) {
            const int64_t slot =
                dq_step_slot(step, key_tile, runs.table.data(), tile_segments, tail_slots_begin, block_m);
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
              dq_row_slots(offsets.data(), segments, runs.cu_runs.data(), run_count, token, tail_slots_begin, block_m);
          ASSERT_NE(read.own_slot, read.tile_slot);
          // The tile's tokens are the run's [tile_begin, tile_end), each naming the same tile.
          ASSERT_LE(read.tile_begin, token);
          ASSERT_LT(token, read.tile_end);
          ASSERT_LE(read.tile_end - read.tile_begin, block_m);
          if (token + 1 < tokens) {
            const DqRowSlots next = dq_row_slots(offsets.data(), segments, runs.cu_runs.data(), run_count, token + 1,
                                                 tail_slots_begin, block_m);
            ASSERT_EQ(next.tile_begin == read.tile_begin, token + 1 < read.tile_end) << "token " << token;
          }
          // The convert pass derives the own slot of the row 8 further from this row's slots.
          if (token + 8 < read.tile_end) {
            const DqRowSlots later = dq_row_slots(offsets.data(), segments, runs.cu_runs.data(), run_count, token + 8,
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

bool same_step(const QueryStep& a, const QueryStep& b) {
  return a.run == b.run && a.begin == b.begin && a.rows_begin == b.rows_begin && a.rows_end == b.rows_end &&
         a.head == b.head && a.causal == b.causal;
}

// The consumers' steps as the kernels see them: the first from the walk (its slot from a cursor of
// their own), every later one from what the producer handed over beside the stage before (its slot
// from the producer's cursor, fresh at the walk's start), until a step marked last. Over every key
// tile of random layouts and trees, heads included, that is the walk and the dQ warp's slots, step
// for step, and both hand-over forms agree.
TEST(Sm90StepHandOver, ReplaysTheWalkAndItsSlots) {
  for (const std::vector<int32_t>& lengths : segment_length_cases()) {
    const std::vector<int32_t> offsets = offsets_of(lengths);
    const auto segments = static_cast<int>(lengths.size());
    const int tokens = offsets.back();
    for (const std::vector<int64_t>& parents : parent_cases(segments)) {
      const BackwardRuns runs =
          plan_runs(Layout::from_tree(parents, std::vector<int64_t>(lengths.begin(), lengths.end())));
      const Layout layout = Layout::from_tree(parents, std::vector<int64_t>(lengths.begin(), lengths.end()));
      for (const int block_m : {64, 128}) {
        const int64_t tail_slots_begin = dq_tail_slots_begin(tokens, segments, block_m);
        for (const TileWork& key_tile : plan_key_tiles(layout, runs, 128, block_m)) {
          const int kv_head = 1, heads_per_kv_head = 3;
          const QueryWalk walk =
              QueryWalk::of_key_tile(offsets.data(), runs.table.data(), key_tile, kv_head, heads_per_kv_head, block_m);
          std::vector<QueryStep> walked;
          std::vector<int64_t> walked_slots;
          SegmentCursor dq_warp_segments{offsets.data()};
          for (QueryStep step = walk.first; !walk.done(step); walk.advance(step)) {
            walked.push_back(step);
            walked_slots.push_back(
                dq_step_slot(step, key_tile, runs.table.data(), dq_warp_segments, tail_slots_begin, block_m));
          }
          ASSERT_FALSE(walked.empty());

          SegmentCursor first_segments{offsets.data()}, producer_segments{offsets.data()};
          const DqSlotSource source{key_tile, runs.table.data(), producer_segments, tail_slots_begin, block_m};
          QueryStep consumed = walk.first;
          int64_t slot = dq_step_slot(consumed, key_tile, runs.table.data(), first_segments, tail_slots_begin, block_m);
          QueryStep produced = walk.first, produced_plain = walk.first;
          for (size_t i = 0;; ++i) {
            ASSERT_LT(i, walked.size()) << "the hand-over runs past the walk";
            ASSERT_TRUE(same_step(consumed, walked[i])) << "step " << i;
            ASSERT_EQ(slot, walked_slots[i]) << "step " << i;
            HandedStepAndDqSlot handed{};
            HandedStep plain{};
            const bool last = hand_over_next(walk, produced, handed, source);
            ASSERT_EQ(hand_over_next(walk, produced_plain, plain), last);
            ASSERT_EQ(handed.step.last, last);
            ASSERT_EQ(last, i + 1 == walked.size()) << "step " << i;
            if (last) break;
            ASSERT_TRUE(same_step(plain.next, handed.step.next));
            consumed = handed.step.next;
            slot = handed.next_dq_slot;
          }
        }
      }
    }
  }
}

// The dQ warp's segment search over a walk's tile starts (ascending in a run, then starting over
// at a run's first segment, as for the next run or head) agrees with the binary search.
TEST(Sm90DqAccumulator, SegmentCursorFollowsAWalk) {
  for (const std::vector<int32_t>& lengths : segment_length_cases()) {
    const std::vector<int32_t> offsets = offsets_of(lengths);
    const auto segments = static_cast<int>(lengths.size());
    for (const std::vector<int64_t>& parents : parent_cases(segments)) {
      const BackwardRuns runs =
          plan_runs(Layout::from_tree(parents, std::vector<int64_t>(lengths.begin(), lengths.end())));
      SegmentCursor cursor{offsets.data()};
      for (int pass = 0; pass < 2; ++pass) {
        for (const QueryRun& run : runs.table) {  // the walks' runs, each list ended by an empty entry
          for (int begin = run.begin; begin < run.end; begin += 64) {
            ASSERT_EQ(cursor.at(begin, run.first_segment), segment_of_token(offsets.data(), segments, begin))
                << "pass " << pass << " token " << begin;
          }
        }
      }
    }
  }
}

// Each segment's run, as the plan lays them.
TEST(Sm90DqAccumulator, RunOfEverySegment) {
  for (const std::vector<int32_t>& lengths : segment_length_cases()) {
    const auto segments = static_cast<int>(lengths.size());
    for (const std::vector<int64_t>& parents : parent_cases(segments)) {
      const BackwardRuns runs =
          plan_runs(Layout::from_tree(parents, std::vector<int64_t>(lengths.begin(), lengths.end())));
      const auto run_count = static_cast<int>(runs.cu_runs.size()) - 1;
      for (int r = 0; r < run_count; ++r) {
        for (int segment = runs.cu_runs[r]; segment < runs.cu_runs[r + 1]; ++segment) {
          const SegmentRange run = run_of_segment(runs.cu_runs.data(), run_count, segment);
          ASSERT_EQ(run.begin, runs.cu_runs[r]) << "segment " << segment;
          ASSERT_EQ(run.end, runs.cu_runs[r + 1]) << "segment " << segment;
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
