// Arguments of the CUDA forward kernels, filled by the entry point (forward_entry.cpp) and read by
// value. Strides are in elements; all Q/K/V/O rows are 16-byte aligned (checked before launch).
#pragma once

#include <cstdint>

#include "host/query_plan.h"

namespace dualkv::detail {

struct ForwardKernelParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* lse;
  int64_t q_token_stride, q_head_stride;
  int64_t k_token_stride, k_head_stride;
  int64_t v_token_stride, v_head_stride;
  int64_t out_token_stride, out_head_stride;
  int64_t lse_head_stride;
  const QueryTile* tiles;     // the query plan (host/query_plan.h), in device memory
  const KeyRange* ranges;     // the key ranges its tiles index
  int32_t heads;              // H
  int32_t heads_per_kv_head;  // H / Hk: query head h reads kv head h / heads_per_kv_head
  float softmax_scale;        // for the natural-log LSE
  float softmax_scale_log2;   // softmax_scale * log2(e): softmax runs on exp2
};

}  // namespace dualkv::detail
