#include "cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace dualkv::detail::cpu {

int resolve_thread_count(int requested) {
  if (requested > 0) return requested;
  // hardware_concurrency() may report 0 when it cannot tell.
  return std::max(1u, std::thread::hardware_concurrency());
}

void parallel_for(int64_t num_items, int num_threads, const std::function<void(int64_t)>& body) {
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;

  auto work = [&] {
    for (int64_t i = next++; i < num_items && !failed.load(std::memory_order_relaxed); i = next++) {
      try {
        body(i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
        failed = true;
      }
    }
  };

  const int64_t helpers = std::min<int64_t>(num_threads, num_items) - 1;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(std::max<int64_t>(helpers, 0)));
  for (int64_t t = 0; t < helpers; ++t) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // The system refused another thread: the ones already running share the items.
    }
  }
  work();
  for (std::thread& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace dualkv::detail::cpu
