// The work plans of a call on the device, from the layout's plan cache (host/plan_cache.h): the
// first call that needs a plan on a device builds it and uploads it on its stream; later calls
// with the layout (or a copy of it) only order their stream after that upload. Shared by every
// kernel family: families with the same tile sizes share a plan.
//
// CUDA graph capture: a call whose plans are cached captures no upload, so it can be captured;
// a call that would have to build one is an Error naming options.stream (an upload from host
// memory cannot be captured). A plan that a captured call used is never freed (a replay may come
// after its layout is gone): one allocation per captured layout, device and kernel shape, kept
// until the process exits.
#pragma once

#include <cstdint>

#include "dualkv/layout.h"
#include "dualkv/params.h"
#include "host/backward_plan.h"
#include "host/plan_cache.h"
#include "host/query_plan.h"

namespace dualkv::detail {

// One call's use of a cached plan: from construction on, the call's stream runs after the
// upload; the plan is freed only after what the stream ran until the PlanUse was destroyed.
class PlanUse {
 public:
  PlanUse(DevicePlanBuffer* buffer, void* stream);  // buffer nullptr: a captured call, nothing to order
  ~PlanUse();
  PlanUse(const PlanUse&) = delete;
  PlanUse& operator=(const PlanUse&) = delete;

 private:
  DevicePlanBuffer* buffer_;
  void* stream_;
};

// Destroy these after launching the kernels that read them.
struct DeviceQueryPlan {
  const QueryTile* tiles;
  const KeyRange* ranges;
  int64_t num_tiles;
  PlanUse use;
};

struct DeviceBackwardPlan {
  const int32_t* cu_seqlens;
  const int32_t* cu_runs;
  int64_t num_runs;
  const QueryRun* runs;
  const TileWork* key_tiles;
  int64_t num_key_tiles;
  const QueryTile* query_tiles;  // none unless dq_query_block > 0
  const KeyRange* query_key_ranges;
  int64_t num_query_tiles;
  PlanUse use;
};

// build_query_plan(layout, block_m) on `device`, the current device, for a call on
// options.stream.
DeviceQueryPlan device_query_plan(const Layout& layout, int block_m, int device, const ExecutionOptions& options);

// backward_plan_image(layout, key_block, query_block, dq_query_block) on `device`, the current
// device, for a call on options.stream.
DeviceBackwardPlan device_backward_plan(const Layout& layout, int key_block, int query_block, int dq_query_block,
                                        int device, const ExecutionOptions& options);

}  // namespace dualkv::detail
