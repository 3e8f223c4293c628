// The key blocks one query tile visits, in order, over its key-range list (host/query_plan.h):
// each range in blocks of kBlockN keys from the range's first key. Host-device code, so the CPU
// suite checks exactly the walk the kernels run (tests/cpu/test_key_block_walk.cpp).
//
// A block's mask follows from where it sits:
//   - kNone: every key is inside the range and, in the causal range, at or before the tile's
//     first query (the N*R x P response-to-prompt rectangle is all kNone blocks);
//   - kBounds: an ancestor range's last block, which reaches past the range's end;
//   - kCausal: a block of the tile's own segment holding a key after the tile's first query.
// A block that reaches past its range's end loads rows of another segment (or past T): those
// scores are masked, and kernels whose loads do not zero such rows must also keep their V rows
// out of P V (0 * NaN is NaN), hence reaches_past_range().
#pragma once

#include <cstdint>

#include "cuda/common/host_device.h"
#include "host/query_plan.h"

namespace dualkv::detail {

enum class BlockMask { kNone, kBounds, kCausal };

template <int kBlockN>
class KeyBlockWalk {
 public:
  DUALKV_HOST_DEVICE KeyBlockWalk(const QueryTile& tile, const KeyRange* ranges)
      : ranges_(ranges), range_(tile.range_begin), last_range_(tile.range_end - 1), q_begin_(tile.q_begin) {
    enter_range();
  }

  // Blocks of the whole tile, for loops that need the count up front.
  static DUALKV_HOST_DEVICE int32_t count(const QueryTile& tile, const KeyRange* ranges) {
    int32_t blocks = 0;
    for (int32_t r = tile.range_begin; r < tile.range_end; ++r) {
      blocks += (ranges[r].end - ranges[r].begin + kBlockN - 1) / kBlockN;
    }
    return blocks;
  }

  DUALKV_HOST_DEVICE bool done() const { return range_ > last_range_; }
  DUALKV_HOST_DEVICE int32_t key_begin() const { return key_begin_; }
  // One past the last key of the block's range; may fall inside the block.
  DUALKV_HOST_DEVICE int32_t range_end() const { return range_end_; }
  DUALKV_HOST_DEVICE bool causal() const { return range_ == last_range_; }
  DUALKV_HOST_DEVICE bool reaches_past_range() const { return key_begin_ + kBlockN > range_end_; }
  DUALKV_HOST_DEVICE BlockMask mask() const {
    if (causal()) return key_begin_ + kBlockN - 1 > q_begin_ ? BlockMask::kCausal : BlockMask::kNone;
    return reaches_past_range() ? BlockMask::kBounds : BlockMask::kNone;
  }

  DUALKV_HOST_DEVICE void advance() {
    key_begin_ += kBlockN;
    if (key_begin_ >= range_end_) {
      ++range_;
      enter_range();
    }
  }

 private:
  DUALKV_HOST_DEVICE void enter_range() {
    if (done()) return;
    key_begin_ = ranges_[range_].begin;
    range_end_ = ranges_[range_].end;
  }

  const KeyRange* ranges_;
  int32_t range_;
  int32_t last_range_;
  int32_t q_begin_;
  int32_t key_begin_ = 0;
  int32_t range_end_ = 0;
};

}  // namespace dualkv::detail
