// Device copies of one layout's work plans, kept with the layout: the first CUDA call that needs a
// plan (a kind and tile sizes, on one device) builds and uploads it, and every later call with the
// layout reuses it, so a model of L layers plans once per micro-batch instead of on each of its 2L
// attention calls (docs/decisions.md, "Plans are cached with the layout").
//
// dualkv::Layout owns one PlanCache through a shared_ptr, so copies of a Layout share it (their
// offsets, and so their plans, are equal) and the plans are freed with the last copy. Plain C++:
// device buffers are made and freed by the CUDA layer behind the DevicePlanBuffer interface
// (cuda/common/device_plan.h), and the CPU suite checks this bookkeeping with fake buffers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

namespace dualkv::detail {

// What a plan is for, on one device: its kind and the tile sizes it was built with (unused
// sizes 0).
struct PlanKey {
  enum class Kind : int32_t { kQueryTiles, kBackwardTiles };
  Kind kind;
  int32_t device;
  std::array<int32_t, 3> blocks;

  friend bool operator==(const PlanKey& a, const PlanKey& b) {
    return a.kind == b.kind && a.device == b.device && a.blocks == b.blocks;
  }
};

// Where one array of a plan lies in its buffer: `count` items from byte `offset`.
struct PlanRegion {
  size_t offset;
  int64_t count;
};

// 16 bytes: the widest load a kernel makes from a plan array (a 16-byte tile as one vector).
inline constexpr size_t kPlanAlignment = 16;

// Host image of a device plan: arrays back to back, each kPlanAlignment-aligned, so one upload
// moves them all.
class PlanImage {
 public:
  template <typename T>
  void append(const std::vector<T>& items) {
    static_assert(std::is_trivially_copyable_v<T>, "plans are copied byte for byte");
    const size_t offset = (bytes_.size() + kPlanAlignment - 1) / kPlanAlignment * kPlanAlignment;
    bytes_.resize(offset + items.size() * sizeof(T));
    if (!items.empty()) std::memcpy(bytes_.data() + offset, items.data(), items.size() * sizeof(T));
    regions_.push_back({offset, static_cast<int64_t>(items.size())});
  }

  const std::vector<unsigned char>& bytes() const { return bytes_; }
  const std::vector<PlanRegion>& regions() const { return regions_; }

 private:
  std::vector<unsigned char> bytes_;
  std::vector<PlanRegion> regions_;
};

// One device allocation holding an uploaded plan image. A call brackets its launches with
// begin_use and end_use on its stream (a cudaStream_t): the launches run after the upload, and
// the allocation is freed only after them.
class DevicePlanBuffer {
 public:
  virtual ~DevicePlanBuffer() = default;
  virtual const void* data() const = 0;
  virtual void begin_use(void* stream) = 0;
  virtual void end_use(void* stream) noexcept = 0;
};

// A cached plan: its device buffer and where each array of its image lies in it.
struct CachedPlan {
  std::unique_ptr<DevicePlanBuffer> buffer;
  std::vector<PlanRegion> regions;

  template <typename T>
  const T* region(size_t index) const {
    return reinterpret_cast<const T*>(static_cast<const unsigned char*>(buffer->data()) + regions[index].offset);
  }
  int64_t count(size_t index) const { return regions[index].count; }
};

// Thread-safe: several threads may run calls with one Layout at once.
class PlanCache {
 public:
  // The plan for `key`, or nullptr if none was made yet.
  const CachedPlan* find(const PlanKey& key) const;
  // The plan for `key`, made by `make` on the first request (under the cache's lock, so two
  // threads asking for one key make it once). A `make` that throws leaves nothing cached.
  const CachedPlan& find_or_make(const PlanKey& key, const std::function<CachedPlan()>& make);
  // Plans made so far; a plan lives as long as the cache.
  size_t size() const;

 private:
  const CachedPlan* find_locked(const PlanKey& key) const;

  mutable std::mutex mutex_;
  std::vector<std::pair<PlanKey, std::unique_ptr<const CachedPlan>>> plans_;
};

}  // namespace dualkv::detail
