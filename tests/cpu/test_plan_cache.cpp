// The plan cache kept with a Layout (host/plan_cache.h), with fake device buffers: a plan is made
// once per key however many calls (and threads) ask for it, copies of a Layout share its plans,
// the last copy frees them, and a plan image lays its arrays out aligned and intact.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "dualkv/layout.h"
#include "host/plan_cache.h"

namespace dualkv::detail {
namespace {

// Counts the buffers alive; holds no memory.
class FakeBuffer final : public DevicePlanBuffer {
 public:
  explicit FakeBuffer(std::atomic<int>& alive) : alive_(alive) { ++alive_; }
  ~FakeBuffer() override { --alive_; }
  const void* data() const override { return this; }
  void begin_use(void* /*stream*/) override {}
  void end_use(void* /*stream*/) noexcept override {}

 private:
  std::atomic<int>& alive_;
};

const PlanKey kForward{PlanKey::Kind::kQueryTiles, 0, {128, 0, 0}};

// A maker that counts its calls.
struct Maker {
  std::atomic<int> calls{0};
  std::atomic<int> alive{0};
  CachedPlan operator()() {
    ++calls;
    return CachedPlan{std::make_unique<FakeBuffer>(alive), {{0, 1}}};
  }
};

TEST(PlanCache, MakesEachPlanOnce) {
  const Layout layout = Layout::from_lengths({64}, {{32, 16}});
  PlanCache& cache = plan_cache(layout);
  Maker maker;
  const auto make = [&] { return maker(); };
  EXPECT_EQ(cache.find(kForward), nullptr);
  const CachedPlan& first = cache.find_or_make(kForward, make);
  const CachedPlan& second = cache.find_or_make(kForward, make);
  EXPECT_EQ(&first, &second);
  EXPECT_EQ(cache.find(kForward), &first);
  EXPECT_EQ(maker.calls, 1);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(PlanCache, EveryPartOfTheKeyTellsPlansApart) {
  const Layout layout = Layout::from_lengths({64}, {{32, 16}});
  PlanCache& cache = plan_cache(layout);
  Maker maker;
  const auto make = [&] { return maker(); };
  const PlanKey keys[] = {
      kForward,
      {PlanKey::Kind::kQueryTiles, 1, {128, 0, 0}},      // another device
      {PlanKey::Kind::kQueryTiles, 0, {64, 0, 0}},       // another tile size
      {PlanKey::Kind::kBackwardTiles, 0, {128, 0, 0}},   // another kind
      {PlanKey::Kind::kBackwardTiles, 0, {128, 64, 0}},  // another inner block
      {PlanKey::Kind::kBackwardTiles, 0, {128, 64, 64}},
  };
  for (const PlanKey& key : keys) cache.find_or_make(key, make);
  for (const PlanKey& key : keys) cache.find_or_make(key, make);
  EXPECT_EQ(maker.calls, 6);
  EXPECT_EQ(cache.size(), 6u);
}

TEST(PlanCache, CopiesOfALayoutShareItsPlansAndTheLastCopyFreesThem) {
  Maker maker;
  {
    const Layout layout = Layout::from_lengths({64}, {{32, 16}});
    plan_cache(layout).find_or_make(kForward, [&] { return maker(); });
    {
      const Layout copy = layout;
      EXPECT_EQ(&plan_cache(copy), &plan_cache(layout));
      EXPECT_NE(plan_cache(copy).find(kForward), nullptr);
    }
    EXPECT_EQ(maker.alive, 1) << "a copy going away keeps the plans";
    // Equal offsets from another factory call are another Layout with plans of its own.
    const Layout other = Layout::from_offsets(layout.cu_seqlens(), layout.cu_groups());
    EXPECT_NE(&plan_cache(other), &plan_cache(layout));
    EXPECT_EQ(plan_cache(other).find(kForward), nullptr);
  }
  EXPECT_EQ(maker.alive, 0);
}

TEST(PlanCache, AFailedMakeCachesNothing) {
  const Layout layout = Layout::from_lengths({64}, {{32, 16}});
  PlanCache& cache = plan_cache(layout);
  EXPECT_THROW(cache.find_or_make(kForward, []() -> CachedPlan { throw std::runtime_error("upload failed"); }),
               std::runtime_error);
  EXPECT_EQ(cache.size(), 0u);
  Maker maker;
  cache.find_or_make(kForward, [&] { return maker(); });
  EXPECT_EQ(maker.calls, 1);
}

TEST(PlanCache, ConcurrentCallsMakeAPlanOnce) {
  const Layout layout = Layout::from_lengths({64}, {{32, 16}});
  Maker maker;
  std::vector<std::thread> threads;
  std::vector<const CachedPlan*> seen(8, nullptr);
  for (size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&, t] { seen[t] = &plan_cache(layout).find_or_make(kForward, [&] { return maker(); }); });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(maker.calls, 1);
  for (const CachedPlan* plan : seen) EXPECT_EQ(plan, seen[0]);
}

TEST(PlanImage, ArraysAreAlignedAndIntact) {
  const std::vector<int32_t> offsets = {0, 3, 5};  // 12 bytes
  const std::vector<int64_t> wide = {-1, 7};       // starts at 16
  const std::vector<int32_t> none;                 // empty region
  const std::vector<uint8_t> bytes = {1, 2, 3};    // after the empty one
  PlanImage image;
  image.append(offsets);
  image.append(wide);
  image.append(none);
  image.append(bytes);
  ASSERT_EQ(image.regions().size(), 4u);
  for (const PlanRegion& region : image.regions()) EXPECT_EQ(region.offset % kPlanAlignment, 0u);
  EXPECT_EQ(image.regions()[0].offset, 0u);
  EXPECT_EQ(image.regions()[1].offset, 16u);
  EXPECT_EQ(image.regions()[2].count, 0);
  EXPECT_EQ(image.regions()[3].offset, 32u);
  EXPECT_EQ(image.bytes().size(), 35u);
  EXPECT_EQ(std::memcmp(image.bytes().data(), offsets.data(), 12), 0);
  EXPECT_EQ(std::memcmp(image.bytes().data() + 16, wide.data(), 16), 0);
  EXPECT_EQ(std::memcmp(image.bytes().data() + 32, bytes.data(), 3), 0);
}

}  // namespace
}  // namespace dualkv::detail
