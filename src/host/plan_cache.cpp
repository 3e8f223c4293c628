#include "host/plan_cache.h"

#include "dualkv/layout.h"

namespace dualkv::detail {

const CachedPlan* PlanCache::find_locked(const PlanKey& key) const {
  for (const auto& [plan_key, plan] : plans_) {
    if (plan_key == key) return plan.get();
  }
  return nullptr;
}

const CachedPlan* PlanCache::find(const PlanKey& key) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return find_locked(key);
}

const CachedPlan& PlanCache::find_or_make(const PlanKey& key, const std::function<CachedPlan()>& make) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (const CachedPlan* plan = find_locked(key)) return *plan;
  plans_.emplace_back(key, std::make_unique<const CachedPlan>(make()));
  return *plans_.back().second;
}

size_t PlanCache::size() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return plans_.size();
}

PlanCache& plan_cache(const Layout& layout) { return *layout.plan_cache_; }

}  // namespace dualkv::detail
