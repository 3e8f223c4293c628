// CPU forward pass: O = softmax(scale * Q K^T + mask) V and LSE = log sum exp, per query head.
//
// Kv heads are processed one after another: each one's K and V are staged once (staged_head.h)
// and shared by the H / Hk query heads that read it. Inside a kv head, (query head, query block)
// items run in parallel, heaviest block first; every item owns its output rows, so no two threads
// write the same element and the result does not depend on the thread count.
// An item streams the block's key ranges in the order of tile_walk.h, kRowTile queries against
// kColumnTile keys per step, with an online softmax: a running max and sum per row and the output
// rescaled whenever the max grows, so no score row is ever stored.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/gather.h"
#include "cpu/staged_head.h"
#include "cpu/thread_pool.h"
#include "cpu/tile_math.h"
#include "cpu/tile_walk.h"
#include "cpu/visible_ranges.h"
#include "cpu/work_shape.h"
#include "host/backend.h"

namespace dualkv::detail {
namespace {

using cpu::Copies;
using cpu::kColumnTile;
using cpu::kRowTile;
using cpu::StagedHead;
using cpu::TokenBlock;

// Online softmax state of the rows of one query block and their unnormalised output.
template <typename Acc>
struct BlockSoftmax {
  BlockSoftmax(int32_t rows, int64_t head_dim)
      : max(static_cast<size_t>(rows), -std::numeric_limits<Acc>::infinity()),
        sum(static_cast<size_t>(rows), Acc(0)),
        out(static_cast<size_t>(rows * head_dim), Acc(0)) {}

  std::vector<Acc> max;
  std::vector<Acc> sum;
  std::vector<Acc> out;
};

template <typename Acc>
class ForwardPass {
 public:
  ForwardPass(const Layout& layout, const ForwardParams& params)
      : layout_(layout),
        visibility_(layout),
        params_(params),
        head_dim_(params.q.head_dim),
        heads_per_kv_(params.q.heads / params.k.heads),
        scale_(static_cast<Acc>(params.softmax_scale)),
        keys_(params.k.tokens, head_dim_, Copies::kColumnTiles),
        values_(params.v.tokens, head_dim_, Copies::kRows) {
    queries_.reserve(static_cast<size_t>(heads_per_kv_));
    for (int64_t i = 0; i < heads_per_kv_; ++i) queries_.emplace_back(params.q.tokens, head_dim_, Copies::kRows);
  }

  void run() {
    const int threads = cpu::resolve_thread_count(params_.options.cpu_threads);
    const std::vector<TokenBlock> blocks = cpu::split_into_blocks(layout_, cpu::kTokenBlock);
    std::vector<int64_t> costs;
    costs.reserve(blocks.size());
    for (const TokenBlock& block : blocks) costs.push_back(visibility_.pairs_of_query_block(block));
    const std::vector<int32_t> order = cpu::heaviest_first(costs);
    const int64_t tokens = layout_.total_tokens();

    for (int64_t kv_head = 0; kv_head < params_.k.heads; ++kv_head) {
      cpu::parallel_for(cpu::staging_items(tokens), threads, [&](int64_t item) {
        const int64_t begin = item * cpu::kStagingTokens;
        stage(kv_head, begin, std::min(begin + cpu::kStagingTokens, tokens));
      });
      cpu::parallel_for(static_cast<int64_t>(order.size()) * heads_per_kv_, threads, [&](int64_t item) {
        const int64_t local_head = item % heads_per_kv_;
        attend(kv_head * heads_per_kv_ + local_head, queries_[static_cast<size_t>(local_head)],
               blocks[static_cast<size_t>(order[static_cast<size_t>(item / heads_per_kv_)])]);
      });
    }
  }

 private:
  void stage(int64_t kv_head, int64_t begin, int64_t end) {
    keys_.load(params_.k, kv_head, begin, end);
    values_.load(params_.v, kv_head, begin, end);
    for (int64_t i = 0; i < heads_per_kv_; ++i) {
      queries_[static_cast<size_t>(i)].load(params_.q, kv_head * heads_per_kv_ + i, begin, end);
    }
  }

  void attend(int64_t head, const StagedHead<Acc>& queries, const TokenBlock& block) const {
    BlockSoftmax<Acc> state(block.end - block.begin, head_dim_);
    cpu::walk_query_block(visibility_.keys_seen_by(block), block, [&](const cpu::QueryTileStep& step) {
      add_key_tile(queries, step, step.first_query - block.begin, state);
    });
    for (int32_t query = block.begin; query < block.end; ++query) {
      const size_t row = static_cast<size_t>(query - block.begin);
      write_row(head, query, state.max[row], state.sum[row], &state.out[row * head_dim_]);
    }
  }

  // Folds the visible keys of one step into the softmax state of its rows, which are rows
  // row0 .. row0 + step.rows - 1 of the block.
  void add_key_tile(const StagedHead<Acc>& queries, const cpu::QueryTileStep& step, int32_t row0,
                    BlockSoftmax<Acc>& state) const {
    const Acc* query_rows[kRowTile];
    cpu::tile_rows(queries, step.first_query, step.rows, query_rows);
    cpu::ScoreTile<Acc> scores;
    cpu::dot_tile(query_rows, keys_.column_tile(step.key), kColumnTile, head_dim_, scores);
    const int begin = step.column_begin;
    for (int r = 0; r < step.rows; ++r) {
      const int end = step.column_end(r);
      if (end <= begin) continue;
      const size_t row = static_cast<size_t>(row0 + r);
      Acc* out = &state.out[row * head_dim_];
      // A NaN score never becomes the max (comparisons with NaN are false) but reaches the sum
      // and the output through exp(NaN) below, so it propagates.
      Acc tile_max = state.max[row];
      for (int c = begin; c < end; ++c) {
        scores[r][c] *= scale_;
        if (scores[r][c] > tile_max) tile_max = scores[r][c];
      }
      if (tile_max > state.max[row]) {
        const Acc rescale = std::exp(state.max[row] - tile_max);
        state.sum[row] *= rescale;
        cpu::scale_in_place(rescale, head_dim_, out);
        state.max[row] = tile_max;
      }
      Acc probabilities[kColumnTile];
      for (int c = begin; c < end; ++c) {
        probabilities[c] = std::exp(scores[r][c] - state.max[row]);
        state.sum[row] += probabilities[c];
      }
      cpu::add_weighted_rows(probabilities + begin, end - begin, values_.row(step.key + begin), head_dim_, head_dim_,
                             out);
    }
  }

  void write_row(int64_t head, int64_t query, Acc max, Acc sum, Acc* out) const {
    cpu::scale_in_place(Acc(1) / sum, head_dim_, out);
    cpu::store_row(params_.out, query, head, out);
    params_.lse.data[head * params_.lse.head_stride + query] = static_cast<float>(max + std::log(sum));
  }

  const Layout& layout_;
  const cpu::Visibility visibility_;
  const ForwardParams& params_;
  const int64_t head_dim_;
  const int64_t heads_per_kv_;
  const Acc scale_;
  StagedHead<Acc> keys_;
  StagedHead<Acc> values_;
  std::vector<StagedHead<Acc>> queries_;  // the query heads reading the current kv head
};

}  // namespace

void cpu_forward(const Layout& layout, const ForwardParams& params) {
  if (params.options.accumulation == Accumulation::kFloat64) {
    ForwardPass<double>(layout, params).run();
  } else {
    ForwardPass<float>(layout, params).run();
  }
}

}  // namespace dualkv::detail
