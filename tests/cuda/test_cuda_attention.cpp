// Forward and backward on the GPU over a grid of awkward shapes, both 16-bit dtypes and every head
// dim each kernel family is compiled for, with the device's tiles and with the portable tiles of
// GPUs with less shared memory per block (A100: 163 KiB, sm_86/sm_89: 99 KiB); plus the tiny
// problems the sanitizer runs (--gtest_filter=*Sanitizer*).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "attention_checks.h"

namespace dualkv_test {
namespace {

using dualkv::DType;
using dualkv::KernelFamily;

// A chain 16 segments deep with a leaf beside every level but the last, packed depth-first.
TreeSpec deep_chain() {
  TreeSpec tree;
  const int64_t lengths[] = {1, 17, 63, 65, 127, 129, 2, 300};
  int64_t previous = -1;
  for (int level = 0; level < 16; ++level) {
    const auto node = static_cast<int64_t>(tree.parents.size());
    tree.parents.push_back(previous);
    tree.lengths.push_back(lengths[level % 8]);
    if (level < 15) {
      tree.parents.push_back(node);
      tree.lengths.push_back(lengths[(level + 3) % 8]);
    }
    previous = node;
  }
  return tree;
}

// P and R of 1, 17, 127, 129 and 1023; ragged responses; several groups with different P and N;
// GQA ratios 1, 3, 4 and 8 (3 leaves rows of a packed Hopper tile unused); contiguous and
// strided placements. Tree layouts: a multi-turn rollout branching after its second turn, a leaf
// that shares its query run with a sibling that has children, a chain 16 deep, a tree packed in an
// order that is not depth-first, and several lone roots.
std::vector<AttentionCase> shape_cases() {
  return {
      {"P1_R1_gqa1", {{1, {1}}}, 2, 2, Placement::kContiguous},
      {"P17_R17_1_127_gqa4_strided", {{17, {17, 1, 127}}}, 8, 2, Placement::kFusedAndHeadMajor},
      {"P127_R129_1_gqa8", {{127, {129, 1}}}, 8, 1, Placement::kContiguous},
      {"P129_R127_17_129_gqa1_strided", {{129, {127, 17, 129}}}, 4, 4, Placement::kFusedAndHeadMajor},
      {"P1023_R1023_1_gqa4", {{1023, {1023, 1}}}, 4, 1, Placement::kContiguous},
      {"P129_R65_1_gqa3", {{129, {65, 1}}}, 6, 2, Placement::kContiguous},
      {"P1_R1023_17_gqa8_strided", {{1, {1023, 17}}}, 8, 1, Placement::kFusedAndHeadMajor},
      {"four_groups_ragged_gqa4_strided",
       {{17, {1, 17}}, {129, {129, 127, 1, 5}}, {1, {17}}, {255, {64, 1, 1, 300}}},
       8,
       2,
       Placement::kFusedAndHeadMajor},
      {"tree_multiturn_gqa4_strided",
       {},
       8,
       2,
       Placement::kFusedAndHeadMajor,
       {{-1, 0, 1, 2, 3, 4, 3, 6}, {129, 17, 65, 127, 1, 130, 64, 3}}},
      {"tree_leaf_then_branch_gqa3",
       {},
       6,
       2,
       Placement::kContiguous,
       {{-1, 0, 0, 2, 2, -1, 5, 6, 5}, {70, 30, 50, 1, 90, 3, 1, 64, 65}}},
      {"tree_depth16_gqa8", {}, 8, 1, Placement::kContiguous, deep_chain()},
      {"tree_other_order_gqa1_strided",
       {},
       4,
       4,
       Placement::kFusedAndHeadMajor,
       {{-1, -1, 0, 1, 2, 0, 3, 2}, {33, 129, 1, 17, 64, 127, 5, 200}}},
      {"trees_lone_roots_gqa4", {}, 4, 1, Placement::kContiguous, {{-1, -1, -1}, {1, 129, 300}}},
  };
}

// The head dims each kernel family is compiled for.
constexpr int64_t kPortableHeadDims[] = {64, 128, 256};
constexpr int64_t kHopperHeadDims[] = {64, 128, 256};

// One compiled kernel of a family: its dtype and head dim.
struct FamilyKernel {
  DType dtype;
  int64_t head_dim;
  KernelFamily family;
};

std::vector<FamilyKernel> family_kernels() {
  std::vector<FamilyKernel> kernels;
  for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (const int64_t head_dim : kPortableHeadDims) kernels.push_back({dtype, head_dim, KernelFamily::kPortable});
    for (const int64_t head_dim : kHopperHeadDims) kernels.push_back({dtype, head_dim, KernelFamily::kHopper});
  }
  return kernels;
}

// The forward of each kernel family on every shape; with NaN in every other segment too, and with
// keys that grow along each segment.
using FamilyParam = std::tuple<AttentionCase, FamilyKernel>;

std::string family_name(const ::testing::TestParamInfo<FamilyParam>& info) {
  const auto& [problem, kernel] = info.param;
  return problem.name + "_" + dualkv::dtype_name(kernel.dtype) + "_d" + std::to_string(kernel.head_dim) +
         (kernel.family == KernelFamily::kHopper ? "_hopper" : "_portable");
}

class CudaForward : public ::testing::TestWithParam<FamilyParam> {};

TEST_P(CudaForward, MatchesReferences) {
  const auto& [problem, kernel] = GetParam();
  check_forward(problem, kernel.dtype, kernel.head_dim, {kernel.family, 0});
}

TEST_P(CudaForward, NanInOddSegmentsStaysThere) {
  const auto& [problem, kernel] = GetParam();
  check_forward(problem, kernel.dtype, kernel.head_dim, {kernel.family, 0}, InputPattern::kNanInOddSegments);
}

// NaN in the values alone of every other segment: the rows that see them are NaN, every other row
// and every LSE within budget.
TEST_P(CudaForward, NanValuesInOddSegmentsStayThere) {
  const auto& [problem, kernel] = GetParam();
  check_forward(problem, kernel.dtype, kernel.head_dim, {kernel.family, 0}, InputPattern::kNanValuesInOddSegments);
}

// Keys growing along each segment: the maximum of a row jumps at later key blocks, and O is
// rescaled mid-walk (the Hopper forward's rare rescale path, both of its P buffers).
TEST_P(CudaForward, LaterKeysRaiseTheMaximum) {
  const auto& [problem, kernel] = GetParam();
  check_forward(problem, kernel.dtype, kernel.head_dim, {kernel.family, 0}, InputPattern::kGrowingKeys);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaForward,
                         ::testing::Combine(::testing::ValuesIn(shape_cases()), ::testing::ValuesIn(family_kernels())),
                         family_name);

// The backward of each kernel family on every shape (both modes), and with NaN in every other segment.
class CudaBackward : public ::testing::TestWithParam<FamilyParam> {};

TEST_P(CudaBackward, MatchesReferences) {
  const auto& [problem, kernel] = GetParam();
  check_backward(problem, kernel.dtype, kernel.head_dim, {kernel.family, 0});
}

// With NaN in every odd segment, P1_R1 keeps only its one-token prompt, whose gradients are 0 in
// exact arithmetic: there is no relative budget to compare the kernels' rounding (~1e-8) with.
std::vector<AttentionCase> nan_backward_cases() {
  std::vector<AttentionCase> cases = shape_cases();
  cases.erase(std::remove_if(cases.begin(), cases.end(), [](const AttentionCase& c) { return c.name == "P1_R1_gqa1"; }),
              cases.end());
  return cases;
}

class CudaBackwardNan : public ::testing::TestWithParam<FamilyParam> {};

TEST_P(CudaBackwardNan, NanInOddSegmentsStaysThere) {
  const auto& [problem, kernel] = GetParam();
  check_backward(problem, kernel.dtype, kernel.head_dim, {kernel.family, 0}, InputPattern::kNanInOddSegments);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaBackwardNan,
                         ::testing::Combine(::testing::ValuesIn(nan_backward_cases()),
                                            ::testing::ValuesIn(family_kernels())),
                         family_name);

INSTANTIATE_TEST_SUITE_P(Shapes, CudaBackward,
                         ::testing::Combine(::testing::ValuesIn(shape_cases()), ::testing::ValuesIn(family_kernels())),
                         family_name);

// The portable kernels of a GPU with less shared memory per block than the one running the suite,
// run here by capping the shared memory per block: sm_86/sm_89 (99 KiB) get the backward's
// single-buffered 128 x 32 tiles at head_dim 128 and 32 x 32 tiles (64-query forward tiles) at 256;
// an A100 (163 KiB) gets head_dim 256's largest portable tiles, which must fit its limit. Head dim
// 64 runs the same tiles on every GPU, and head_dim 128 the same on an A100 as on Hopper.
struct CappedTiles {
  int64_t head_dim;
  size_t max_shared_memory_per_block;
  const char* gpu;  // test name suffix
};

constexpr CappedTiles kCappedTiles[] = {
    {128, kSm86SharedMemoryPerBlock, "sm86"},
    {256, kA100SharedMemoryPerBlock, "a100"},
    {256, kSm86SharedMemoryPerBlock, "sm86"},
};

using CappedParam = std::tuple<AttentionCase, DType, CappedTiles>;

std::string capped_name(const ::testing::TestParamInfo<CappedParam>& info) {
  const auto& [problem, dtype, tiles] = info.param;
  return problem.name + "_" + dualkv::dtype_name(dtype) + "_d" + std::to_string(tiles.head_dim) + "_" + tiles.gpu;
}

class CudaAttentionCappedTiles : public ::testing::TestWithParam<CappedParam> {};

TEST_P(CudaAttentionCappedTiles, Forward) {
  const auto& [problem, dtype, tiles] = GetParam();
  check_forward(problem, dtype, tiles.head_dim, {KernelFamily::kPortable, tiles.max_shared_memory_per_block});
}

TEST_P(CudaAttentionCappedTiles, Backward) {
  const auto& [problem, dtype, tiles] = GetParam();
  check_backward(problem, dtype, tiles.head_dim, {KernelFamily::kPortable, tiles.max_shared_memory_per_block});
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttentionCappedTiles,
                         ::testing::Combine(::testing::ValuesIn(shape_cases()),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16),
                                            ::testing::ValuesIn(kCappedTiles)),
                         capped_name);

// Small enough to run under compute-sanitizer memcheck and racecheck in well under a minute;
// every tensor in its own exactly-sized allocation so that memcheck sees any overrun.
AttentionCase sanitizer_case() { return {"tiny", {{17, {5, 1}}, {3, {9}}}, 4, 2, Placement::kContiguous}; }

TEST(CudaSanitizer, Forward) { check_forward(sanitizer_case(), DType::kFloat16, 64, {KernelFamily::kPortable, 0}); }

TEST(CudaSanitizer, ForwardHopper) {
  check_forward(sanitizer_case(), DType::kBFloat16, 128, {KernelFamily::kHopper, 0}, InputPattern::kNanInOddSegments);
}

// Tiles that walk many steps (the tiny case's walk one): a prompt of 300 and responses of 260 and 7.
AttentionCase long_walk_case() { return {"long_walk", {{300, {260, 7}}}, 4, 2, Placement::kContiguous}; }

// Query tiles that walk several key blocks, with keys that grow along each segment: the Hopper
// forward's pipelined loop, its two P buffers and its mid-walk rescale.
TEST(CudaSanitizer, ForwardHopperLongWalk) {
  check_forward(long_walk_case(), DType::kFloat16, 128, {KernelFamily::kHopper, 0}, InputPattern::kGrowingKeys);
}

TEST(CudaSanitizer, Backward) { check_backward(sanitizer_case(), DType::kBFloat16, 128, {KernelFamily::kPortable, 0}); }

TEST(CudaSanitizer, BackwardHopper) {
  check_backward(sanitizer_case(), DType::kFloat16, 128, {KernelFamily::kHopper, 0}, InputPattern::kNanInOddSegments);
}

// Key tiles that walk many query steps: the Hopper backward's Q/dO stages, its alternating dS
// buffers and the dQ warp's hand-offs from step to step, at both head dims (head_dim 64 takes
// 128-query steps and waits for dK at each step's end).
TEST(CudaSanitizer, BackwardHopperLongWalk) {
  check_backward(long_walk_case(), DType::kFloat16, 128, {KernelFamily::kHopper, 0}, InputPattern::kNanInOddSegments);
}

TEST(CudaSanitizer, BackwardHopperLongWalkHeadDim64) {
  check_backward(long_walk_case(), DType::kBFloat16, 64, {KernelFamily::kHopper, 0}, InputPattern::kNanInOddSegments);
}

// A small tree: a root, a branch with two leaves, a leaf of the root.
AttentionCase tree_sanitizer_case() {
  return {"tiny_tree", {}, 4, 2, Placement::kContiguous, {{-1, 0, 1, 1, 0}, {17, 5, 9, 1, 3}}};
}

TEST(CudaSanitizer, TreeForward) {
  check_forward(tree_sanitizer_case(), DType::kFloat16, 64, {KernelFamily::kPortable, 0});
  check_forward(tree_sanitizer_case(), DType::kBFloat16, 128, {KernelFamily::kHopper, 0},
                InputPattern::kNanInOddSegments);
}

TEST(CudaSanitizer, TreeBackward) {
  check_backward(tree_sanitizer_case(), DType::kBFloat16, 128, {KernelFamily::kPortable, 0});
  check_backward(tree_sanitizer_case(), DType::kFloat16, 128, {KernelFamily::kHopper, 0},
                 InputPattern::kNanInOddSegments);
}

TEST(CudaSanitizer, BackwardSm86Tiles) {
  check_backward(sanitizer_case(), DType::kFloat16, 128, {KernelFamily::kPortable, kSm86SharedMemoryPerBlock});
}

// Head dim 256 of the Hopper family: the forward's 64-key blocks over a long walk with rescales,
// and the backward whose warpgroups split the head dimension (P^T and dS^T through alternating
// shared buffers, dQ by vector reductions) over many query steps.
TEST(CudaSanitizer, ForwardHopperLongWalkHeadDim256) {
  check_forward(long_walk_case(), DType::kBFloat16, 256, {KernelFamily::kHopper, 0}, InputPattern::kGrowingKeys);
}

TEST(CudaSanitizer, BackwardHopperLongWalkHeadDim256) {
  check_backward(long_walk_case(), DType::kFloat16, 256, {KernelFamily::kHopper, 0}, InputPattern::kNanInOddSegments);
}

// Head dim 256 of the portable family: key blocks that the forward walks over several steps with
// a rescale of O, key tiles that the backward walks over several query steps, NaN in neighbouring
// segments; and the tiles of sm_86/sm_89 GPUs.
TEST(CudaSanitizer, ForwardHeadDim256) {
  check_forward(long_walk_case(), DType::kBFloat16, 256, {KernelFamily::kPortable, 0}, InputPattern::kGrowingKeys);
}

TEST(CudaSanitizer, ForwardHeadDim256Sm86Tiles) {
  check_forward(sanitizer_case(), DType::kFloat16, 256, {KernelFamily::kPortable, kSm86SharedMemoryPerBlock},
                InputPattern::kNanInOddSegments);
}

TEST(CudaSanitizer, BackwardHeadDim256LongWalk) {
  check_backward(long_walk_case(), DType::kFloat16, 256, {KernelFamily::kPortable, 0}, InputPattern::kNanInOddSegments);
}

TEST(CudaSanitizer, BackwardHeadDim256Sm86Tiles) {
  check_backward(long_walk_case(), DType::kBFloat16, 256, {KernelFamily::kPortable, kSm86SharedMemoryPerBlock});
}

}  // namespace
}  // namespace dualkv_test
