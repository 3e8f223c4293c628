// CPU backward pass (FlashAttention math, O and LSE read from the forward, never recomputed):
//   D_q = dO_q . O_q,  P_qk = exp(scale * q.k - LSE_q),  dS_qk = P_qk (dO_q . V_k - D_q),
//   dQ_q = scale * sum_k dS_qk K_k,  dK_k = scale * sum_q dS_qk Q_q,  dV_k = sum_q P_qk dO_q.
//
// Kv heads are processed one after another: K, V and, for each of the H / Hk query heads reading
// them, Q, dO, LSE and D are staged once (staged_head.h). Inside a kv head two kinds of items run
// in one parallel list, heaviest first:
//   - dQ items (query head, query block): walk the block's key ranges like the forward pass;
//   - dK/dV items (key block): walk the queries that see the block in every query head of the
//     group, which also sums the group's heads into the kv head's gradient.
// Both walks, and which entries of each tile the mask keeps, are those of tile_walk.h.
// Each item owns the gradient rows it writes, so there are no atomics and the result does not
// depend on the thread count. P and dS are recomputed tile by tile in both kinds of items
// instead of being stored, which keeps scratch at O(tokens * head_dim).
#include <algorithm>
#include <cmath>
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
using cpu::TokenRange;

// The staged operands of one query head.
template <typename Acc>
struct QueryHead {
  QueryHead(int64_t tokens, int64_t head_dim)
      : queries(tokens, head_dim, Copies::kBoth),
        douts(tokens, head_dim, Copies::kBoth),
        lse(static_cast<size_t>(tokens)),
        delta(static_cast<size_t>(tokens)) {}

  StagedHead<Acc> queries;
  StagedHead<Acc> douts;
  std::vector<Acc> lse;
  std::vector<Acc> delta;  // D_q = dO_q . O_q
};

// One entry of the parallel work list.
struct WorkItem {
  enum class Kind { kQueryGradient, kKeyValueGradient } kind;
  int32_t block;
  int32_t local_head;  // query head within the kv head's group; unused by key/value items
};

template <typename Acc>
class BackwardPass {
 public:
  BackwardPass(const Layout& layout, const BackwardParams& params)
      : layout_(layout),
        visibility_(layout),
        params_(params),
        head_dim_(params.q.head_dim),
        heads_per_kv_(params.q.heads / params.k.heads),
        scale_(static_cast<Acc>(params.softmax_scale)),
        keys_(params.k.tokens, head_dim_, Copies::kBoth),
        values_(params.v.tokens, head_dim_, Copies::kBoth) {
    group_.reserve(static_cast<size_t>(heads_per_kv_));
    for (int64_t i = 0; i < heads_per_kv_; ++i) group_.emplace_back(params.q.tokens, head_dim_);
  }

  void run() {
    const int threads = cpu::resolve_thread_count(params_.options.cpu_threads);
    const std::vector<TokenBlock> blocks = cpu::split_into_blocks(layout_, cpu::kTokenBlock);
    const std::vector<WorkItem> items = plan(blocks);
    const int64_t tokens = layout_.total_tokens();

    for (int64_t kv_head = 0; kv_head < params_.k.heads; ++kv_head) {
      cpu::parallel_for(cpu::staging_items(tokens), threads, [&](int64_t item) {
        const int64_t begin = item * cpu::kStagingTokens;
        stage(kv_head, begin, std::min(begin + cpu::kStagingTokens, tokens));
      });
      cpu::parallel_for(static_cast<int64_t>(items.size()), threads, [&](int64_t i) {
        const WorkItem& item = items[static_cast<size_t>(i)];
        const TokenBlock& block = blocks[static_cast<size_t>(item.block)];
        if (item.kind == WorkItem::Kind::kQueryGradient) {
          query_gradient(kv_head * heads_per_kv_ + item.local_head, group_[static_cast<size_t>(item.local_head)],
                         block);
        } else {
          key_value_gradient(kv_head, block);
        }
      });
    }
  }

 private:
  // Both kinds of items for every block, heaviest first. A key/value item covers every query
  // head of the group, so its cost is its pairs times the group size.
  std::vector<WorkItem> plan(const std::vector<TokenBlock>& blocks) const {
    std::vector<WorkItem> items;
    std::vector<int64_t> costs;
    for (int32_t b = 0; b < static_cast<int32_t>(blocks.size()); ++b) {
      const int64_t query_pairs = visibility_.pairs_of_query_block(blocks[static_cast<size_t>(b)]);
      for (int32_t h = 0; h < heads_per_kv_; ++h) {
        items.push_back({WorkItem::Kind::kQueryGradient, b, h});
        costs.push_back(query_pairs);
      }
      items.push_back({WorkItem::Kind::kKeyValueGradient, b, 0});
      costs.push_back(visibility_.pairs_of_key_block(blocks[static_cast<size_t>(b)]) * heads_per_kv_);
    }
    std::vector<WorkItem> ordered;
    ordered.reserve(items.size());
    for (int32_t i : cpu::heaviest_first(costs)) ordered.push_back(items[static_cast<size_t>(i)]);
    return ordered;
  }

  void stage(int64_t kv_head, int64_t begin, int64_t end) {
    keys_.load(params_.k, kv_head, begin, end);
    values_.load(params_.v, kv_head, begin, end);
    std::vector<Acc> out_row(static_cast<size_t>(head_dim_));
    for (int64_t i = 0; i < heads_per_kv_; ++i) {
      const int64_t head = kv_head * heads_per_kv_ + i;
      QueryHead<Acc>& staged = group_[static_cast<size_t>(i)];
      staged.queries.load(params_.q, head, begin, end);
      staged.douts.load(params_.dout, head, begin, end);
      for (int64_t t = begin; t < end; ++t) {
        staged.lse[static_cast<size_t>(t)] = static_cast<Acc>(params_.lse.data[head * params_.lse.head_stride + t]);
        cpu::load_row(params_.out, t, head, out_row.data());
        const Acc* dout = staged.douts.row(t);
        Acc delta = 0;
        for (int64_t d = 0; d < head_dim_; ++d) delta += dout[d] * out_row[static_cast<size_t>(d)];
        staged.delta[static_cast<size_t>(t)] = delta;
      }
    }
  }

  // dQ of one query head's block, walking the block's keys like the forward pass.
  void query_gradient(int64_t head, const QueryHead<Acc>& staged, const TokenBlock& block) const {
    std::vector<Acc> dq(static_cast<size_t>((block.end - block.begin) * head_dim_), Acc(0));
    cpu::walk_query_block(visibility_.keys_seen_by(block), block, [&](const cpu::QueryTileStep& step) {
      const Acc* query_rows[kRowTile];
      const Acc* dout_rows[kRowTile];
      cpu::tile_rows(staged.queries, step.first_query, step.rows, query_rows);
      cpu::tile_rows(staged.douts, step.first_query, step.rows, dout_rows);
      cpu::ScoreTile<Acc> scores;
      cpu::ScoreTile<Acc> dout_dot_values;
      cpu::dot_tile(query_rows, keys_.column_tile(step.key), kColumnTile, head_dim_, scores);
      cpu::dot_tile(dout_rows, values_.column_tile(step.key), kColumnTile, head_dim_, dout_dot_values);
      const int begin = step.column_begin;
      for (int r = 0; r < step.rows; ++r) {
        const int end = step.column_end(r);
        if (end <= begin) continue;
        const int32_t query = step.first_query + r;
        const Acc lse = staged.lse[static_cast<size_t>(query)];
        const Acc delta = staged.delta[static_cast<size_t>(query)];
        Acc score_gradients[kColumnTile];  // dS
        for (int c = begin; c < end; ++c) {
          const Acc p = std::exp(scale_ * scores[r][c] - lse);
          score_gradients[c] = p * (dout_dot_values[r][c] - delta);
        }
        cpu::add_weighted_rows(score_gradients + begin, end - begin, keys_.row(step.key + begin), head_dim_, head_dim_,
                               &dq[static_cast<size_t>((query - block.begin) * head_dim_)]);
      }
    });
    for (int32_t query = block.begin; query < block.end; ++query) {
      Acc* row = &dq[static_cast<size_t>((query - block.begin) * head_dim_)];
      cpu::scale_in_place(scale_, head_dim_, row);
      cpu::store_row(params_.dq, query, head, row);
    }
  }

  // dK and dV of one key block of a kv head, summed over the query heads that read it.
  // A shared key (a prompt's) collects terms from its segment and every descendant (P + N*R queries per head),
  // so a single running fp32 sum would lose digits as it grows: terms are summed in Acc over
  // kFlushSteps tiles at a time and those partial sums are added in double.
  void key_value_gradient(int64_t kv_head, const TokenBlock& block) const {
    constexpr int kFlushSteps = 16;
    const std::vector<TokenRange> queries = visibility_.queries_seeing(block);
    const size_t block_values = static_cast<size_t>((block.end - block.begin) * head_dim_);
    std::vector<Acc> dk(block_values, Acc(0));
    std::vector<Acc> dv(block_values, Acc(0));
    std::vector<double> dk_total(block_values, 0.0);
    std::vector<double> dv_total(block_values, 0.0);
    auto flush = [&] {
      for (size_t i = 0; i < block_values; ++i) {
        dk_total[i] += dk[i];
        dv_total[i] += dv[i];
      }
      std::fill(dk.begin(), dk.end(), Acc(0));
      std::fill(dv.begin(), dv.end(), Acc(0));
    };
    int steps = 0;
    for (const QueryHead<Acc>& staged : group_) {
      cpu::walk_key_block(queries, block, [&](const cpu::KeyTileStep& step) {
        const Acc* key_rows[kRowTile];
        const Acc* value_rows[kRowTile];
        cpu::tile_rows(keys_, step.first_key, step.rows, key_rows);
        cpu::tile_rows(values_, step.first_key, step.rows, value_rows);
        cpu::ScoreTile<Acc> scores;
        cpu::ScoreTile<Acc> values_dot_douts;
        cpu::dot_tile(key_rows, staged.queries.column_tile(step.query), kColumnTile, head_dim_, scores);
        cpu::dot_tile(value_rows, staged.douts.column_tile(step.query), kColumnTile, head_dim_, values_dot_douts);
        const int end = step.column_end;
        for (int r = 0; r < step.rows; ++r) {
          const int begin = step.column_begin(r);
          if (end <= begin) continue;
          Acc probabilities[kColumnTile];
          Acc score_gradients[kColumnTile];  // dS
          for (int c = begin; c < end; ++c) {
            const size_t q = static_cast<size_t>(step.query + c);
            probabilities[c] = std::exp(scale_ * scores[r][c] - staged.lse[q]);
            score_gradients[c] = probabilities[c] * (values_dot_douts[r][c] - staged.delta[q]);
          }
          const size_t row = static_cast<size_t>((step.first_key + r - block.begin) * head_dim_);
          cpu::add_weighted_rows(probabilities + begin, end - begin, staged.douts.row(step.query + begin), head_dim_,
                                 head_dim_, &dv[row]);
          cpu::add_weighted_rows(score_gradients + begin, end - begin, staged.queries.row(step.query + begin),
                                 head_dim_, head_dim_, &dk[row]);
        }
        if (++steps % kFlushSteps == 0) flush();
      });
    }
    flush();
    for (size_t i = 0; i < block_values; ++i) {
      dk[i] = static_cast<Acc>(dk_total[i]);
      dv[i] = static_cast<Acc>(dv_total[i]);
    }
    for (int32_t key = block.begin; key < block.end; ++key) {
      const size_t row = static_cast<size_t>((key - block.begin) * head_dim_);
      cpu::scale_in_place(scale_, head_dim_, &dk[row]);
      cpu::store_row(params_.dk, key, kv_head, &dk[row]);
      cpu::store_row(params_.dv, key, kv_head, &dv[row]);
    }
  }

  const Layout& layout_;
  const cpu::Visibility visibility_;
  const BackwardParams& params_;
  const int64_t head_dim_;
  const int64_t heads_per_kv_;
  const Acc scale_;
  StagedHead<Acc> keys_;
  StagedHead<Acc> values_;
  std::vector<QueryHead<Acc>> group_;  // the query heads reading the current kv head
};

}  // namespace

void cpu_backward(const Layout& layout, const BackwardParams& params) {
  if (params.options.accumulation == Accumulation::kFloat64) {
    BackwardPass<double>(layout, params).run();
  } else {
    BackwardPass<float>(layout, params).run();
  }
}

}  // namespace dualkv::detail
