// Forward and backward on the GPU over a grid of awkward shapes, both 16-bit dtypes and both
// compiled head dims, with the device's tiles and with the tiles of a 99 KiB (sm_86/sm_89) GPU;
// plus the tiny problems the sanitizer runs (--gtest_filter=*Sanitizer*).
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

using ShapeParam = std::tuple<AttentionCase, DType, int64_t>;

std::string shape_name(const ::testing::TestParamInfo<ShapeParam>& info) {
  const auto& [problem, dtype, head_dim] = info.param;
  return problem.name + "_" + dualkv::dtype_name(dtype) + "_d" + std::to_string(head_dim);
}

// The forward of each kernel family on every shape; with NaN in every other segment too, and with
// keys that grow along each segment.
using FamilyParam = std::tuple<AttentionCase, DType, int64_t, KernelFamily>;

std::string family_name(const ::testing::TestParamInfo<FamilyParam>& info) {
  const auto& [problem, dtype, head_dim, family] = info.param;
  return problem.name + "_" + dualkv::dtype_name(dtype) + "_d" + std::to_string(head_dim) +
         (family == KernelFamily::kHopper ? "_hopper" : "_portable");
}

class CudaForward : public ::testing::TestWithParam<FamilyParam> {};

TEST_P(CudaForward, MatchesReferences) {
  const auto& [problem, dtype, head_dim, family] = GetParam();
  check_forward(problem, dtype, head_dim, {family, 0});
}

TEST_P(CudaForward, NanInOddSegmentsStaysThere) {
  const auto& [problem, dtype, head_dim, family] = GetParam();
  check_forward(problem, dtype, head_dim, {family, 0}, InputPattern::kNanInOddSegments);
}

// NaN in the values alone of every other segment: the rows that see them are NaN, every other row
// and every LSE within budget.
TEST_P(CudaForward, NanValuesInOddSegmentsStayThere) {
  const auto& [problem, dtype, head_dim, family] = GetParam();
  check_forward(problem, dtype, head_dim, {family, 0}, InputPattern::kNanValuesInOddSegments);
}

// Keys growing along each segment: the maximum of a row jumps at later key blocks, and O is
// rescaled mid-walk (the Hopper forward's rare rescale path, both of its P buffers).
TEST_P(CudaForward, LaterKeysRaiseTheMaximum) {
  const auto& [problem, dtype, head_dim, family] = GetParam();
  check_forward(problem, dtype, head_dim, {family, 0}, InputPattern::kGrowingKeys);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaForward,
                         ::testing::Combine(::testing::ValuesIn(shape_cases()),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16),
                                            ::testing::Values(int64_t{64}, int64_t{128}),
                                            ::testing::Values(KernelFamily::kPortable, KernelFamily::kHopper)),
                         family_name);

// The backward of each kernel family on every shape (both modes), and with NaN in every other segment.
class CudaBackward : public ::testing::TestWithParam<FamilyParam> {};

TEST_P(CudaBackward, MatchesReferences) {
  const auto& [problem, dtype, head_dim, family] = GetParam();
  check_backward(problem, dtype, head_dim, {family, 0});
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
  const auto& [problem, dtype, head_dim, family] = GetParam();
  check_backward(problem, dtype, head_dim, {family, 0}, InputPattern::kNanInOddSegments);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaBackwardNan,
                         ::testing::Combine(::testing::ValuesIn(nan_backward_cases()),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16),
                                            ::testing::Values(int64_t{64}, int64_t{128}),
                                            ::testing::Values(KernelFamily::kPortable, KernelFamily::kHopper)),
                         family_name);

INSTANTIATE_TEST_SUITE_P(Shapes, CudaBackward,
                         ::testing::Combine(::testing::ValuesIn(shape_cases()),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16),
                                            ::testing::Values(int64_t{64}, int64_t{128}),
                                            ::testing::Values(KernelFamily::kPortable, KernelFamily::kHopper)),
                         family_name);

// The kernels an sm_86/sm_89 GPU runs (99 KiB of shared memory per block: head_dim 128 takes the
// backward's single-buffered 128 x 32 tiles), run here by capping the shared memory per block.
// Head dim 64 runs the same tiles on every GPU, so only 128 is repeated.
class CudaAttentionSm86Tiles : public ::testing::TestWithParam<ShapeParam> {};

TEST_P(CudaAttentionSm86Tiles, Forward) {
  const auto& [problem, dtype, head_dim] = GetParam();
  check_forward(problem, dtype, head_dim, {KernelFamily::kPortable, kSm86SharedMemoryPerBlock});
}

TEST_P(CudaAttentionSm86Tiles, Backward) {
  const auto& [problem, dtype, head_dim] = GetParam();
  check_backward(problem, dtype, head_dim, {KernelFamily::kPortable, kSm86SharedMemoryPerBlock});
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttentionSm86Tiles,
                         ::testing::Combine(::testing::ValuesIn(shape_cases()),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16),
                                            ::testing::Values(int64_t{128})),
                         shape_name);

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

}  // namespace
}  // namespace dualkv_test
