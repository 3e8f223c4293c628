// Every argument rule of forward() and backward(), one test each, plus a sweep that runs all bad
// cases and checks they throw dualkv::Error without touching any buffer.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu/attention_problem.h"
#include "cpu/expect_error.h"
#include "dualkv/dualkv.h"

namespace dualkv_test {
namespace {

using dualkv::BackwardParams;
using dualkv::ForwardParams;

// Small but with every dimension > 1, so that every stride rule applies: T = 10, H = 4, Hk = 2.
ProblemShape base_shape() {
  ProblemShape shape;
  shape.batch = {{3, {2, 1}}, {2, {2}}};
  shape.heads = 4;
  shape.kv_heads = 2;
  shape.head_dim = 8;
  return shape;
}

std::unique_ptr<AttentionProblem> base_problem() {
  std::mt19937_64 rng = rng_for_current_test();
  return std::make_unique<AttentionProblem>(base_shape(), rng);
}

// One bad configuration of one entry point: the entry point itself and its workspace query,
// which validates the same way.
struct AttentionRule {
  std::string name;
  std::function<void(AttentionProblem&)> call;
  std::function<void(AttentionProblem&)> workspace_query;
  std::string argument;
  std::string phrase;
};

void PrintTo(const AttentionRule& bad, std::ostream* os) { *os << bad.name; }

ForwardParams params_of(AttentionProblem& problem, const ForwardParams*) {
  return problem.forward_params(dualkv::Accumulation::kFloat32);
}
BackwardParams params_of(AttentionProblem& problem, const BackwardParams*) {
  return problem.backward_params(dualkv::Accumulation::kFloat32);
}
void run_entry(const dualkv::Layout& layout, const ForwardParams& p) { dualkv::forward(layout, p); }
void run_entry(const dualkv::Layout& layout, const BackwardParams& p) { dualkv::backward(layout, p); }
void query_workspace(const dualkv::Layout& layout, const ForwardParams& p) {
  dualkv::forward_workspace_bytes(layout, p);
}
void query_workspace(const dualkv::Layout& layout, const BackwardParams& p) {
  dualkv::backward_workspace_bytes(layout, p);
}
std::string direction_name(const ForwardParams*) { return "Forward"; }
std::string direction_name(const BackwardParams*) { return "Backward"; }

template <typename Params>
AttentionRule rule(const std::string& name, std::function<void(Params&)> mutate, std::string argument,
                   std::string phrase) {
  const Params* tag = nullptr;
  auto bad_params = [mutate](AttentionProblem& problem) {
    Params params = params_of(problem, static_cast<const Params*>(nullptr));
    mutate(params);
    return params;
  };
  return {direction_name(tag) + "_" + name,
          [bad_params](AttentionProblem& problem) { run_entry(problem.layout(), bad_params(problem)); },
          [bad_params](AttentionProblem& problem) { query_workspace(problem.layout(), bad_params(problem)); },
          std::move(argument), std::move(phrase)};
}

// What a tensor argument is compared against.
enum class Role {
  kQuery,    // q itself: sets dtype, device, head_dim and the number of query heads
  kKey,      // k itself: sets the number of kv heads
  kLikeQ,    // out, dout, dq
  kLikeKey,  // v, dk, dv
};

template <typename Params, typename Tensor>
void add_tensor_rules(std::vector<AttentionRule>& rules, const std::string& name, Tensor Params::*member, Role role) {
  using Mutation = std::function<void(Params&)>;
  auto add = [&](const std::string& rule_name, Mutation mutate, const std::string& argument,
                 const std::string& phrase) {
    rules.push_back(rule<Params>(name + "_" + rule_name, std::move(mutate), argument, phrase));
  };
  add(
      "NullData", [member](Params& p) { (p.*member).data = nullptr; }, name, "null");
  add(
      "TokensNotTotal", [member](Params& p) { (p.*member).tokens += 1; }, name + ".tokens", "total_tokens");
  // An empty tensor (what torch passes for zero tokens) has a null pointer: the shape is named.
  add(
      "NoTokensNullData",
      [member](Params& p) {
        (p.*member).tokens = 0;
        (p.*member).data = nullptr;
      },
      name + ".tokens", "total_tokens");
  add(
      "ZeroTokenStride", [member](Params& p) { (p.*member).token_stride = 0; }, name + ".token_stride", ">= 1");
  add(
      "NegativeHeadStride", [member](Params& p) { (p.*member).head_stride *= -1; }, name + ".head_stride", ">= 1");
  add(
      "HeadsOverlap", [member](Params& p) { (p.*member).head_stride = (p.*member).head_dim - 1; },
      name + ".head_stride", "overlap");
  add(
      "TokensOverlap",
      [member](Params& p) {
        Tensor& t = p.*member;
        t.token_stride = t.heads * t.head_stride - 1;
      },
      name + ".token_stride", "overlap");
  // Strides so large that element addresses would wrap around must not be accepted.
  add(
      "TokenStrideBeyondAddressSpace", [member](Params& p) { (p.*member).token_stride = int64_t{1} << 62; },
      name + ".token_stride", "2^48");
  add(
      "HeadStrideBeyondAddressSpace", [member](Params& p) { (p.*member).head_stride = int64_t{1} << 61; },
      name + ".head_stride", "2^48");

  // Changing the head count keeps the view itself well formed, so only the head rule breaks.
  auto set_heads = [member](int64_t heads) {
    return [member, heads](Params& p) {
      Tensor& t = p.*member;
      t.heads = heads;
      t.token_stride = heads * t.head_stride;
    };
  };
  const int64_t heads = base_shape().heads, kv_heads = base_shape().kv_heads;
  switch (role) {
    case Role::kQuery:
      add("HeadsNotMultipleOfKvHeads", set_heads(kv_heads + 1), "q.heads", "multiple");
      add(
          "ZeroHeadDim", [member](Params& p) { (p.*member).head_dim = 0; }, "q.head_dim", "256");
      // The scale a caller gets by default for head_dim 0 is infinite; the head_dim is at fault.
      add(
          "ZeroHeadDimDefaultScale",
          [member](Params& p) {
            (p.*member).head_dim = 0;
            p.softmax_scale = dualkv::default_softmax_scale(0);
          },
          "q.head_dim", "256");
      add(
          "NoHeadsNullData",
          [member](Params& p) {
            (p.*member).heads = 0;
            (p.*member).data = nullptr;
          },
          "q.heads", ">= 1");
      add(
          "HeadDimAbove256",
          [member](Params& p) {
            Tensor& t = p.*member;
            t.head_dim = 257;
            t.head_stride = 257;
            t.token_stride = t.heads * 257;
          },
          "q.head_dim", "256");
      return;
    case Role::kKey:
      add("ZeroHeads", set_heads(0), "k.heads", ">= 1");
      break;
    case Role::kLikeQ:
      add("HeadsNotQHeads", set_heads(heads / 2), name + ".heads", "q.heads");
      break;
    case Role::kLikeKey:
      add("HeadsNotKHeads", set_heads(2 * kv_heads), name + ".heads", "k.heads");
      break;
  }
  add(
      "HeadDimNotQHeadDim", [member](Params& p) { (p.*member).head_dim /= 2; }, name + ".head_dim", "q.head_dim");
  add(
      "DtypeNotQDtype", [member](Params& p) { (p.*member).dtype = dualkv::DType::kBFloat16; }, name + ".dtype",
      "match");
  add(
      "DeviceNotQDevice",
      [member](Params& p) {
        (p.*member).device = {dualkv::DeviceKind::kCuda, 0};
      },
      name + ".device", "match");
}

template <typename Params, typename Lse>
void add_lse_rules(std::vector<AttentionRule>& rules, Lse Params::*member) {
  auto add = [&](const std::string& rule_name, std::function<void(Params&)> mutate, const std::string& argument,
                 const std::string& phrase) {
    rules.push_back(rule<Params>("lse_" + rule_name, std::move(mutate), argument, phrase));
  };
  add(
      "NullData", [member](Params& p) { (p.*member).data = nullptr; }, "lse", "null");
  add(
      "TokensNotTotal", [member](Params& p) { (p.*member).tokens += 1; }, "lse.tokens", "total_tokens");
  add(
      "NoTokensNullData",
      [member](Params& p) {
        (p.*member).tokens = 0;
        (p.*member).data = nullptr;
      },
      "lse.tokens", "total_tokens");
  add(
      "HeadsNotQHeads", [member](Params& p) { (p.*member).heads /= 2; }, "lse.heads", "q.heads");
  add(
      "DeviceNotQDevice",
      [member](Params& p) {
        (p.*member).device = {dualkv::DeviceKind::kCuda, 0};
      },
      "lse.device", "match");
  add(
      "HeadStrideBelowTokens", [member](Params& p) { (p.*member).head_stride -= 1; }, "lse.head_stride", "lse.tokens");
  add(
      "HeadStrideBeyondAddressSpace", [member](Params& p) { (p.*member).head_stride = int64_t{1} << 62; },
      "lse.head_stride", "2^48");
}

template <typename Params>
void add_scalar_rules(std::vector<AttentionRule>& rules) {
  const std::vector<std::pair<std::string, float>> bad_scales = {{"NaN", std::numeric_limits<float>::quiet_NaN()},
                                                                 {"Infinite", std::numeric_limits<float>::infinity()},
                                                                 {"Zero", 0.0f},
                                                                 {"Negative", -0.125f}};
  for (const auto& [label, scale] : bad_scales) {
    const float bad_scale = scale;
    rules.push_back(rule<Params>(
        "SoftmaxScale" + label, [bad_scale](Params& p) { p.softmax_scale = bad_scale; }, "softmax_scale", "finite"));
  }
  rules.push_back(rule<Params>(
      "NegativeCpuThreads", [](Params& p) { p.options.cpu_threads = -1; }, "options.cpu_threads", ">= 0"));
  rules.push_back(rule<Params>(
      "CpuDeviceIndexNotZero",
      [](Params& p) {
        p.q.device = {dualkv::DeviceKind::kCpu, 1};
      },
      "q.device", "index"));
  if (!dualkv::cuda_compiled()) {
    rules.push_back(rule<Params>(
        "CudaTensorsWithoutCuda",
        [](Params& p) {
          const dualkv::Device cuda{dualkv::DeviceKind::kCuda, 0};
          p.q.device = p.k.device = p.v.device = cuda;
          p.lse.device = cuda;
          if constexpr (std::is_same_v<Params, ForwardParams>) {
            p.out.device = cuda;
          } else {
            p.dout.device = p.out.device = cuda;
            p.dq.device = p.dk.device = p.dv.device = cuda;
          }
        },
        "q.device", "CUDA"));
  }
}

// Points an output at memory that already belongs to another argument.
template <typename Params, typename Output, typename Other>
std::function<void(Params&)> alias(Output Params::*output, Other Params::*other) {
  return [output, other](Params& p) {
    using Pointer = decltype((p.*output).data);
    (p.*output).data = static_cast<Pointer>(const_cast<void*>(static_cast<const void*>((p.*other).data)));
  };
}

std::vector<AttentionRule> forward_rules() {
  std::vector<AttentionRule> rules;
  add_scalar_rules<ForwardParams>(rules);
  add_tensor_rules(rules, "q", &ForwardParams::q, Role::kQuery);
  add_tensor_rules(rules, "k", &ForwardParams::k, Role::kKey);
  add_tensor_rules(rules, "v", &ForwardParams::v, Role::kLikeKey);
  add_tensor_rules(rules, "out", &ForwardParams::out, Role::kLikeQ);
  add_lse_rules(rules, &ForwardParams::lse);
  rules.push_back(rule<ForwardParams>("OutOverlapsQ", alias(&ForwardParams::out, &ForwardParams::q), "out", "overlap"));
  rules.push_back(rule<ForwardParams>("OutOverlapsV", alias(&ForwardParams::out, &ForwardParams::v), "out", "overlap"));
  rules.push_back(rule<ForwardParams>("LseOverlapsK", alias(&ForwardParams::lse, &ForwardParams::k), "lse", "overlap"));
  rules.push_back(
      rule<ForwardParams>("LseOverlapsOut", alias(&ForwardParams::lse, &ForwardParams::out), "lse", "overlap"));
  return rules;
}

std::vector<AttentionRule> backward_rules() {
  std::vector<AttentionRule> rules;
  add_scalar_rules<BackwardParams>(rules);
  add_tensor_rules(rules, "dout", &BackwardParams::dout, Role::kLikeQ);
  add_tensor_rules(rules, "q", &BackwardParams::q, Role::kQuery);
  add_tensor_rules(rules, "k", &BackwardParams::k, Role::kKey);
  add_tensor_rules(rules, "v", &BackwardParams::v, Role::kLikeKey);
  add_tensor_rules(rules, "out", &BackwardParams::out, Role::kLikeQ);
  add_lse_rules(rules, &BackwardParams::lse);
  add_tensor_rules(rules, "dq", &BackwardParams::dq, Role::kLikeQ);
  add_tensor_rules(rules, "dk", &BackwardParams::dk, Role::kLikeKey);
  add_tensor_rules(rules, "dv", &BackwardParams::dv, Role::kLikeKey);
  rules.push_back(
      rule<BackwardParams>("DqOverlapsDout", alias(&BackwardParams::dq, &BackwardParams::dout), "dq", "overlap"));
  rules.push_back(
      rule<BackwardParams>("DqOverlapsLse", alias(&BackwardParams::dq, &BackwardParams::lse), "dq", "overlap"));
  rules.push_back(rule<BackwardParams>("DkOverlapsQ", alias(&BackwardParams::dk, &BackwardParams::q), "dk", "overlap"));
  rules.push_back(
      rule<BackwardParams>("DvOverlapsOut", alias(&BackwardParams::dv, &BackwardParams::out), "dv", "overlap"));
  rules.push_back(
      rule<BackwardParams>("DvOverlapsDk", alias(&BackwardParams::dv, &BackwardParams::dk), "dv", "overlap"));
  return rules;
}

std::vector<AttentionRule> all_rules() {
  std::vector<AttentionRule> rules = forward_rules();
  for (AttentionRule& backward : backward_rules()) rules.push_back(std::move(backward));
  return rules;
}

std::string rule_name(const ::testing::TestParamInfo<AttentionRule>& info) { return info.param.name; }

// Byte images of every buffer a problem owns, outputs and padding included.
std::vector<std::vector<unsigned char>> all_bytes(const AttentionProblem& problem) {
  std::vector<std::vector<unsigned char>> bytes = problem.snapshot_backward_inputs();
  for (const StridedTensor* output : {&problem.dq, &problem.dk, &problem.dv}) {
    bytes.push_back(output->storage->bytes());
  }
  return bytes;
}

class AttentionRuleTest : public ::testing::TestWithParam<AttentionRule> {};

TEST_P(AttentionRuleTest, IsRejectedNamingArgumentAndRule) {
  std::unique_ptr<AttentionProblem> problem = base_problem();
  const AttentionRule& bad = GetParam();
  EXPECT_TRUE(rejected_as_expected({bad.name, [&] { bad.call(*problem); }, bad.argument, bad.phrase}));
}

TEST_P(AttentionRuleTest, WorkspaceQueryRejectsItToo) {
  std::unique_ptr<AttentionProblem> problem = base_problem();
  const AttentionRule& bad = GetParam();
  EXPECT_TRUE(rejected_as_expected({bad.name, [&] { bad.workspace_query(*problem); }, bad.argument, bad.phrase}));
}

INSTANTIATE_TEST_SUITE_P(Arguments, AttentionRuleTest, ::testing::ValuesIn(all_rules()), rule_name);

TEST(AttentionRules, EveryBadCallThrowsBeforeTouchingAnyBuffer) {
  for (const AttentionRule& bad : all_rules()) {
    SCOPED_TRACE(bad.name);
    std::unique_ptr<AttentionProblem> problem = base_problem();
    const std::vector<std::vector<unsigned char>> before = all_bytes(*problem);
    EXPECT_THROW(bad.call(*problem), dualkv::Error);
    EXPECT_TRUE(before == all_bytes(*problem));
  }
}

// Guards the tests above: each bad case differs from a configuration that is accepted.
TEST(AttentionRules, BaseProblemIsAccepted) {
  std::unique_ptr<AttentionProblem> problem = base_problem();
  EXPECT_EQ(dualkv::forward_workspace_bytes(problem->layout(), problem->forward_params(dualkv::Accumulation::kFloat32)),
            0u);
  EXPECT_NO_THROW(dualkv::forward(problem->layout(), problem->forward_params(dualkv::Accumulation::kFloat32)));
  EXPECT_EQ(
      dualkv::backward_workspace_bytes(problem->layout(), problem->backward_params(dualkv::Accumulation::kFloat32)),
      0u);
  EXPECT_NO_THROW(dualkv::backward(problem->layout(), problem->backward_params(dualkv::Accumulation::kFloat32)));
}

}  // namespace
}  // namespace dualkv_test
