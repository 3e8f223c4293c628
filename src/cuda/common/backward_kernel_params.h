// Arguments of the CUDA backward kernels, filled by the entry point (backward_entry.cpp). All
// pointers are device pointers; strides are in elements.
#pragma once

#include <cstdint>

#include "host/backward_plan.h"
#include "host/query_plan.h"

namespace dualkv::detail {

template <typename Pointer>
struct TokenHeadView {
  Pointer data;
  int64_t token_stride;
  int64_t head_stride;
};

struct BackwardKernelParams {
  TokenHeadView<const void*> q, k, v, out, dout;
  TokenHeadView<void*> dq, dk, dv;
  const float* lse;  // (H, T)
  int64_t lse_head_stride;
  float* delta;     // (H, T) in rows of stats_row_stride floats, written by the preprocess kernel
  float* lse_log2;  // the forward's LSE times log2(e), in delta's layout (Hopper kernel only; else nullptr)
  int64_t stats_row_stride;
  float* dq_accum;       // fp32, nullptr when deterministic: portable (H, T, d); Hopper sm90/backward/dq_accumulator.h
  float dq_accum_scale;  // the convert pass's factor: 1 if the KV kernel scaled its dQ sums, else softmax_scale
  const int32_t* cu_seqlens;  // num_segments + 1 entries
  int num_segments;
  const int32_t* cu_runs;  // num_runs + 1 entries: run r is segments [cu_runs[r], cu_runs[r + 1])
  int num_runs;
  const QueryRun* runs;  // the run table the key tiles' walks index (host/backward_plan.h)
  const TileWork* key_tiles;
  const QueryTile* query_tiles;      // deterministic only, with their key ranges
  const KeyRange* query_key_ranges;  // (host/query_plan.h)
  int num_key_tiles;
  int num_query_tiles;
  int tokens;
  int heads;
  int kv_heads;
  float softmax_scale;
  void* stream;             // cudaStream_t
  uint64_t* walk_progress;  // Hopper kernels with paced walks: one zeroed slot per KV-kernel CTA
                            // (sm90/backward/walk_pacing.h); else nullptr
};

}  // namespace dualkv::detail
