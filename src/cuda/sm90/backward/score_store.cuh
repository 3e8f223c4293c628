// A consumer warpgroup's 16-bit S^T-shaped accumulator (P^T or dS^T: keys x queries) to a shared
// (queries, keys) SW128 tile, queries contiguous: the tile the dQ GEMM reads as dS and, the same
// bytes read (keys, queries) K-major, the A operand of dV and dK.
//
// The config says which keys and queries a warpgroup's accumulator holds (score_first_key,
// score_first_query, kScoreQueriesPerWarpgroup). One `stmatrix.x4` per pair of 8-query groups:
// matrix m of store i holds keys +8 (m % 2) and queries 8 (2i + m / 2) of the thread's warp, lane
// L pointing at row L % 8 of matrix L / 8. So a thread always points at the same key, and its
// query moves by 16 per store. In the SW128 layout (64-query atoms of 8 keys x 128 bytes, 16-byte
// chunk index XOR key % 8) that is a fixed XOR of the chunk bits and, every 4 stores, the next
// atom: one shared address per thread and a LOP3 per store. CuTe's element-wise copy instead
// computes every store's address with 64-bit swizzle arithmetic: hoisted out of the step loop, it
// spilled at head_dim 64; kept in the loop, at head_dim 256 it was 32 generic 16-bit stores per
// step and thread, queued with the dQ reductions. The address rule is checked against the layout
// at compile time.
#pragma once

#include <cute/tensor.hpp>

namespace dualkv::detail::sm90 {

template <typename Config, typename SmemLayout>
struct TransposedScoreStore {
  using Element = typename Config::Element;
  static constexpr int kStores = Config::kScoreQueriesPerWarpgroup / 16;
  static constexpr uint32_t kAtomBytes = 1024;  // 64 queries x 8 keys of 16-bit elements
  static constexpr uint32_t kStageBytes = Config::kBlockM * Config::kBlockN * sizeof(Element);

  // The key and first query (store 0) of the row consumer thread `thread` points at.
  static constexpr int key_of(int thread) {
    const int lane = thread % 32;
    return Config::score_first_key(thread / 128) + 16 * (thread % 128 / 32) + 8 * (lane / 8 % 2) + lane % 8;
  }
  static constexpr int first_query_of(int thread) {
    return Config::score_first_query(thread / 128) + 8 * (thread % 32 / 16);
  }

  // The row of store `store` at stage `stage`, from the row of store 0 at stage 0 (both as byte
  // offsets in the buffer or as shared addresses: the buffer is 1024-byte aligned).
  static constexpr uint32_t row(uint32_t first_row, int store, int stage) {
    return (first_row ^ (32u * (store % 4))) + kAtomBytes * (store / 4) + kStageBytes * stage;
  }

  // Byte offset of (query, key, stage) in the buffer. The layout's swizzle acts on byte addresses
  // (CuTe applies it to the shared-memory pointer), its linear part counts elements.
  static constexpr uint32_t layout_offset(int query, int key, int stage) {
    constexpr auto layout = SmemLayout{};
    return static_cast<uint32_t>(layout.layout_a()(layout.layout_b()(query, key, stage) * sizeof(Element)));
  }

  // Whether row() is where the layout puts (first query + 16 store, key, stage), for every thread.
  static constexpr bool rows_match_layout() {
    for (int thread = 0; thread < Config::kConsumerThreads; ++thread) {
      const int key = key_of(thread), query = first_query_of(thread);
      const uint32_t first_row = layout_offset(query, key, 0);
      for (int stage = 0; stage < Config::kStages; ++stage) {
        for (int store = 0; store < kStores; ++store) {
          if (row(first_row, store, stage) != layout_offset(query + 16 * store, key, stage)) return false;
        }
      }
    }
    return true;
  }

  uint32_t first_row;  // shared address of this thread's row for store 0, stage 0

  __device__ __forceinline__ TransposedScoreStore(Element* buffer, int thread)
      : first_row(static_cast<uint32_t>(__cvta_generic_to_shared(buffer)) +
                  layout_offset(first_query_of(thread), key_of(thread), 0)) {
    static_assert(rows_match_layout(), "the stmatrix address rule disagrees with the layout");
  }

  // Stores this thread's 16-bit values (the warpgroup's 64-key accumulator layout) to `stage`.
  template <typename Fragment>
  __device__ __forceinline__ void store(const Fragment& scores_transposed, int stage) const {
    const auto packed = cute::recast<uint32_t>(scores_transposed);
    static_assert(decltype(cute::size(packed))::value == 4 * kStores);
    CUTE_UNROLL
    for (int i = 0; i < kStores; ++i) {
      asm volatile("stmatrix.sync.aligned.x4.m8n8.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(row(first_row, i, stage)),
                   "r"(packed(4 * i)), "r"(packed(4 * i + 1)), "r"(packed(4 * i + 2)), "r"(packed(4 * i + 3)));
    }
  }
};

}  // namespace dualkv::detail::sm90
