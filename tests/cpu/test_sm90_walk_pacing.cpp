// Walk pacing of the Hopper backward (src/cuda/sm90/backward/walk_pacing.h): the wait rule, which
// key tile each CTA is paced behind, and paced producers simulated over the plans of two-level
// layouts and trees: every walk ends whatever order the CTAs start in and however their speeds
// differ (no wait cycle), a paced walk never runs more than the lead ahead of its predecessor on
// the same head, and on a long prompt's first wave unpaced walks drift apart head by head where
// paced ones stay together.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "cuda/common/query_walk.h"
#include "cuda/sm90/backward/walk_pacing.h"
#include "dualkv/layout.h"
#include "host/backward_plan.h"

namespace dualkv::detail::sm90 {
namespace {

constexpr int kBlock = 64;

QueryStep step_at(int head, int begin) { return QueryStep{0, begin, begin, begin + kBlock, head, 0}; }

TEST(Sm90WalkPacing, WaitsOnlyWhenTooFarAheadOnTheSameHead) {
  const uint64_t own = walk_position(step_at(2, 1000));
  EXPECT_FALSE(walk_waits(own, kWalkNotStarted, 64));
  EXPECT_FALSE(walk_waits(own, kWalkDone, 64));
  EXPECT_FALSE(walk_waits(own, walk_position(step_at(1, 0)), 64));     // predecessor a head behind
  EXPECT_FALSE(walk_waits(own, walk_position(step_at(3, 5000)), 64));  // predecessor a head ahead
  EXPECT_FALSE(walk_waits(own, walk_position(step_at(2, 936)), 64));   // exactly the lead
  EXPECT_TRUE(walk_waits(own, walk_position(step_at(2, 935)), 64));    // one row more
  EXPECT_FALSE(walk_waits(own, walk_position(step_at(2, 4000)), 64));  // predecessor ahead
  EXPECT_TRUE(walk_waits(walk_position(step_at(0, 128)), walk_position(step_at(0, 0)), 64));
  // Positions order by head, then row, and never collide with the two markers.
  EXPECT_LT(walk_position(step_at(0, 0)), walk_position(step_at(0, 1)));
  EXPECT_LT(walk_position(step_at(0, 2'000'000'000)), walk_position(step_at(1, 0)));
  EXPECT_NE(walk_position(step_at(0, 0)), kWalkNotStarted);
  EXPECT_NE(walk_position(step_at(1 << 30, 2'000'000'000)), kWalkDone);
}

Layout two_level(std::vector<int64_t> prompts, std::vector<std::vector<int64_t>> responses) {
  return Layout::from_lengths(prompts, responses);
}

std::vector<Layout> layouts() {
  std::vector<Layout> result{
      two_level({1000}, {{300, 64, 1, 129}}),
      two_level({777, 64, 130}, {{65, 200}, {3}, {128, 128, 70}}),
      Layout::from_tree({-1, 0, 0, 1, 1, 2, -1, 6}, {400, 130, 70, 64, 200, 1, 256, 90}),
  };
  std::mt19937 rng(7);
  for (int i = 0; i < 4; ++i) {
    std::vector<int64_t> prompts;
    std::vector<std::vector<int64_t>> responses;
    const int groups = 1 + static_cast<int>(rng() % 3);
    for (int g = 0; g < groups; ++g) {
      prompts.push_back(1 + rng() % 900);
      responses.emplace_back();
      const int n = 1 + static_cast<int>(rng() % 5);
      for (int r = 0; r < n; ++r) responses.back().push_back(1 + rng() % 300);
    }
    result.push_back(two_level(prompts, responses));
  }
  return result;
}

TEST(Sm90WalkPacing, PacedBehindThePreviousTileOfTheSameSegmentAndKvHead) {
  for (const Layout& layout : layouts()) {
    const BackwardRuns runs = plan_runs(layout);
    const std::vector<TileWork> tiles = plan_key_tiles(layout, runs, kBlock, kBlock);
    for (const int kv_heads : {1, 3}) {
      for (int64_t block = 0; block < static_cast<int64_t>(tiles.size()) * kv_heads; ++block) {
        const int64_t behind = paced_behind(tiles.data(), block, kv_heads);
        const int64_t tile = block / kv_heads;
        if (tile > 0 && tiles[tile - 1].segment == tiles[tile].segment) {
          EXPECT_EQ(behind, block - kv_heads);
        } else {
          EXPECT_EQ(behind, -1) << "block " << block;
        }
      }
    }
  }
}

// Producers of one launch, a step per tick at most, on `resident` SMs: a CTA starts when an SM is
// free, in `start_order`, and is paced as the kernel paces it (lead_rows 0: not paced).
struct Simulation {
  bool ended = true;                  // every walk ended: no tick in which every running CTA waited
  int64_t max_paced_lead = 0;         // rows a CTA loaded ahead of its running predecessor on the same head
  std::vector<int64_t> lead_by_head;  // the largest such lead at each head, paced or not
};

Simulation simulate(const Layout& layout, int kv_heads, int heads_per_kv_head, int lead_rows, int resident,
                    const std::vector<double>& speeds, std::vector<int64_t> start_order, std::mt19937& rng) {
  const BackwardRuns runs = plan_runs(layout);
  const std::vector<TileWork> tiles = plan_key_tiles(layout, runs, kBlock, kBlock);
  const auto blocks = static_cast<int64_t>(tiles.size()) * kv_heads;
  std::vector<std::vector<QueryStep>> walks(blocks);
  for (int64_t b = 0; b < blocks; ++b) {
    const QueryWalk walk = QueryWalk::of_key_tile(layout.cu_seqlens().data(), runs.table.data(), tiles[b / kv_heads],
                                                  static_cast<int>(b % kv_heads), heads_per_kv_head, kBlock);
    for (QueryStep step = walk.first; !walk.done(step); walk.advance(step)) walks[b].push_back(step);
  }
  std::vector<uint64_t> progress(blocks, kWalkNotStarted);
  std::vector<size_t> next(blocks, 0);
  std::vector<int64_t> running;
  Simulation result;
  result.lead_by_head.assign(kv_heads * heads_per_kv_head, 0);
  size_t started = 0;
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  while (started < start_order.size() || !running.empty()) {
    while (static_cast<int>(running.size()) < resident && started < start_order.size()) {
      running.push_back(start_order[started++]);
    }
    std::shuffle(running.begin(), running.end(), rng);
    bool any_free = false;
    for (size_t i = 0; i < running.size();) {
      const int64_t b = running[i];
      const QueryStep& step = walks[b][next[b]];
      const uint64_t position = walk_position(step);
      progress[b] = position;
      const int64_t behind = paced_behind(tiles.data(), b, kv_heads);
      const uint64_t predecessor = behind >= 0 ? progress[behind] : kWalkNotStarted;
      if (lead_rows > 0 && walk_waits(position, predecessor, lead_rows)) {
        ++i;
        continue;
      }
      any_free = true;
      if (uniform(rng) >= speeds[b]) {
        ++i;
        continue;
      }
      if (predecessor != kWalkNotStarted && predecessor != kWalkDone && (predecessor >> 32) == (position >> 32)) {
        const int64_t lead = step.begin - static_cast<int64_t>(predecessor & 0xffffffffu);
        result.lead_by_head[step.head] = std::max(result.lead_by_head[step.head], lead);
        if (lead_rows > 0) result.max_paced_lead = std::max(result.max_paced_lead, lead);
      }
      if (++next[b] == walks[b].size()) {
        progress[b] = kWalkDone;
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    if (!running.empty() && !any_free) {
      result.ended = false;
      return result;
    }
  }
  return result;
}

// Random start orders (the hardware starts CTAs in no promised order) and speeds: no wait cycle,
// and the lead bound holds.
TEST(Sm90WalkPacing, EveryWalkEndsAndNoPacedWalkRunsAheadOfTheLead) {
  std::mt19937 rng(11);
  for (const Layout& layout : layouts()) {
    const BackwardRuns runs = plan_runs(layout);
    const int64_t tiles = static_cast<int64_t>(plan_key_tiles(layout, runs, kBlock, kBlock).size());
    for (const int kv_heads : {1, 2}) {
      const int64_t blocks = tiles * kv_heads;
      for (const int lead_rows : {kBlock, 2 * kBlock}) {
        for (const int resident : {1, 3, 8}) {
          for (const bool shuffled : {false, true}) {
            std::vector<int64_t> order(blocks);
            std::iota(order.begin(), order.end(), 0);
            if (shuffled) std::shuffle(order.begin(), order.end(), rng);
            std::vector<double> speeds(blocks);
            for (double& speed : speeds) speed = std::uniform_real_distribution<double>(0.2, 1.0)(rng);
            const Simulation run = simulate(layout, kv_heads, 3, lead_rows, resident, speeds, order, rng);
            EXPECT_TRUE(run.ended) << "tokens " << layout.total_tokens() << " resident " << resident
                                   << (shuffled ? " shuffled" : "");
            EXPECT_LE(run.max_paced_lead, lead_rows);
          }
        }
      }
    }
  }
}

// What pacing is for. A long prompt's first wave, every CTA at the same speed: unpaced, a key tile
// runs a step further ahead of its predecessor at every head (its pass is a step shorter); paced,
// the lead stays within one step at every head.
TEST(Sm90WalkPacing, KeepsTheFirstWavesWalksTogether) {
  const Layout layout = two_level({64 * 64}, {{256, 256}});
  const int heads = 6, resident = 16;
  std::mt19937 rng(3);
  const int64_t blocks = static_cast<int64_t>(plan_key_tiles(layout, plan_runs(layout), kBlock, kBlock).size());
  std::vector<int64_t> order(blocks);
  std::iota(order.begin(), order.end(), 0);
  const std::vector<double> speeds(blocks, 1.0);
  const Simulation unpaced = simulate(layout, 1, heads, 0, resident, speeds, order, rng);
  const Simulation paced = simulate(layout, 1, heads, kBlock, resident, speeds, order, rng);
  ASSERT_TRUE(unpaced.ended && paced.ended);
  for (int head = 0; head < heads; ++head) {
    EXPECT_GE(unpaced.lead_by_head[head], (head + 1) * kBlock) << "head " << head;
    EXPECT_LE(paced.lead_by_head[head], kBlock) << "head " << head;
  }
}

}  // namespace
}  // namespace dualkv::detail::sm90
