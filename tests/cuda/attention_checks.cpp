#include "attention_checks.h"

#include <cmath>
#include <initializer_list>
#include <vector>

#include "error_budget.h"
#include "ncopy_reference.h"

namespace dualkv_test {
namespace {

using oracle::DenseTensor;

struct Inputs {
  DenseTensor q, k, v, dout;
};

// NaN in `views` at every token of every odd-numbered segment.
void poison_odd_segments(const dualkv::Layout& layout, std::initializer_list<StridedTensor*> views) {
  for (int32_t s = 1; s < layout.num_segments(); s += 2) {
    for (int32_t t = layout.segment_begin(s); t < layout.segment_end(s); ++t) {
      for (StridedTensor* view : views) {
        for (int64_t h = 0; h < view->heads; ++h) {
          for (int64_t i = 0; i < view->head_dim; ++i) view->write(t, h, i, std::nan(""));
        }
      }
    }
  }
}

// k of the j-th token of every segment times 1 + j / 32 (then rounded to the dtype).
void grow_keys_along_segments(const dualkv::Layout& layout, StridedTensor& k) {
  for (int32_t s = 0; s < layout.num_segments(); ++s) {
    const int32_t begin = layout.segment_begin(s);
    for (int32_t t = begin; t < layout.segment_end(s); ++t) {
      const double factor = 1.0 + (t - begin) / 32.0;
      for (int64_t h = 0; h < k.heads; ++h) {
        for (int64_t i = 0; i < k.head_dim; ++i) k.write(t, h, i, k.read(t, h, i) * factor);
      }
    }
  }
}

// Draws q, k, v and dout into the host views (rounded to the dtype) in the given pattern and
// returns their exact values.
Inputs draw_inputs(const dualkv::Layout& layout, HostTensors& host, InputPattern pattern) {
  std::mt19937_64 rng = rng_for_current_test();
  for (StridedTensor* view : {&host.q, &host.k, &host.v, &host.dout}) fill_uniform(*view, rng);
  if (pattern == InputPattern::kNanInOddSegments) poison_odd_segments(layout, {&host.q, &host.k, &host.v});
  if (pattern == InputPattern::kNanValuesInOddSegments) poison_odd_segments(layout, {&host.v});
  if (pattern == InputPattern::kGrowingKeys) grow_keys_along_segments(layout, host.k);
  return Inputs{to_dense(host.q), to_dense(host.k), to_dense(host.v), to_dense(host.dout)};
}

// Where the fp64 CPU result is NaN the kernel's must be NaN too; those entries are then zeroed in
// every tensor so that the budget compares the rows that must be unaffected.
void expect_nan_exactly_where_reference_is(const char* name, DenseTensor& kernel, std::vector<DenseTensor*> others,
                                           const DenseTensor& fp64) {
  int64_t missing = 0;
  for (size_t i = 0; i < fp64.values.size(); ++i) {
    if (!std::isnan(fp64.values[i])) continue;
    missing += !std::isnan(kernel.values[i]);
    kernel.values[i] = 0.0;
    for (DenseTensor* other : others) other->values[i] = 0.0;
  }
  EXPECT_EQ(missing, 0) << name << ": entries that see a NaN input but are not NaN";
}

void expect_inputs_unmodified(const HostTensors& host, const Inputs& inputs) {
  EXPECT_TRUE(identical(to_dense(host.q), inputs.q)) << "q";
  EXPECT_TRUE(identical(to_dense(host.k), inputs.k)) << "k";
  EXPECT_TRUE(identical(to_dense(host.v), inputs.v)) << "v";
  EXPECT_TRUE(identical(to_dense(host.dout), inputs.dout)) << "dout";
}

void expect_within_budget(const char* name, const DenseTensor& kernel, const DenseTensor& baseline,
                          const DenseTensor& fp64, const DenseTensor& fp32) {
  EXPECT_TRUE(within_error_budget(kernel, baseline, fp64)) << name << " against the CPU path in fp64";
  EXPECT_TRUE(within_error_budget(kernel, baseline, fp32)) << name << " against the N-copy fp32 reference";
}

// Poisons dq/dk/dv on the device, runs one backward, brings everything back to `host`.
void run_backward(const dualkv::Layout& layout, HostTensors& host, DeviceTensors& device, float scale,
                  bool deterministic, const KernelChoice& choice) {
  for (StridedTensor* grad : {&host.dq, &host.dk, &host.dv}) {
    grad->storage->poison();
    device.upload(*grad);
  }
  dualkv::BackwardParams params = device_backward_params(device, host, scale, deterministic);
  params.options.kernel_family = choice.family;
  params.options.max_shared_memory_per_block = choice.max_shared_memory_per_block;
  run_on_device(layout, params);
  for (const StridedTensor* view : host.views()) device.download(*view);
}

// One gradient against its references; with NaN inputs, first that it is NaN exactly where the
// fp64 CPU result is, then the rest within budget.
void expect_gradient(const char* name, DenseTensor kernel, DenseTensor baseline, DenseTensor fp64, DenseTensor fp32,
                     bool nan_inputs) {
  if (nan_inputs) {
    expect_nan_exactly_where_reference_is(name, kernel, {&baseline, &fp32}, fp64);
    for (double& value : fp64.values) value = std::isnan(value) ? 0.0 : value;
  }
  expect_within_budget(name, kernel, baseline, fp64, fp32);
}

}  // namespace

void check_forward(const AttentionCase& problem, dualkv::DType dtype, int64_t head_dim, const KernelChoice& choice,
                   InputPattern pattern) {
  const dualkv::Layout layout = layout_of(problem);
  HostTensors host =
      make_host_tensors(problem.placement, dtype, layout.total_tokens(), problem.heads, problem.kv_heads, head_dim);
  const Inputs inputs = draw_inputs(layout, host, pattern);
  const bool nan_in_odd_segments =
      pattern == InputPattern::kNanInOddSegments || pattern == InputPattern::kNanValuesInOddSegments;
  const float scale = dualkv::default_softmax_scale(head_dim);

  oracle::ForwardResult fp64 = cpu_fp64_forward(layout, inputs.q, inputs.k, inputs.v, scale);
  const std::vector<oracle::CopiedSequence> sequences = reference_sequences_of(problem);
  oracle::ForwardResult fp32 =
      ncopy_reference_forward(sequences, inputs.q, inputs.k, inputs.v, scale, cuda_reference::OperandRounding::kNone);
  oracle::ForwardResult baseline =
      ncopy_reference_forward(sequences, inputs.q, inputs.k, inputs.v, scale, operand_rounding(dtype));
  baseline.out = rounded_to(baseline.out, dtype);

  DeviceTensors device(host);
  dualkv::ForwardParams params = device_forward_params(device, host, scale);
  params.options.kernel_family = choice.family;
  params.options.max_shared_memory_per_block = choice.max_shared_memory_per_block;
  run_on_device(layout, params);
  for (const StridedTensor* view : host.views()) device.download(*view);
  device.download_lse();

  ASSERT_TRUE(fully_written(host.out)) << "out";
  ASSERT_TRUE(fully_written(host.lse)) << "lse";
  EXPECT_TRUE(nothing_written_outside_views(host));
  expect_inputs_unmodified(host, inputs);
  DenseTensor out = to_dense(host.out);
  DenseTensor lse = host.lse.to_dense();
  if (nan_in_odd_segments) {
    expect_nan_exactly_where_reference_is("out", out, {&baseline.out, &fp32.out}, fp64.out);
    expect_nan_exactly_where_reference_is("lse", lse, {&baseline.lse, &fp32.lse}, fp64.lse);
    for (DenseTensor* reference : {&fp64.out, &fp64.lse}) {
      for (double& value : reference->values) value = std::isnan(value) ? 0.0 : value;
    }
  }
  expect_within_budget("out", out, baseline.out, fp64.out, fp32.out);
  expect_within_budget("lse", lse, baseline.lse, fp64.lse, fp32.lse);
}

void check_backward(const AttentionCase& problem, dualkv::DType dtype, int64_t head_dim, const KernelChoice& choice,
                    InputPattern pattern) {
  const dualkv::Layout layout = layout_of(problem);
  HostTensors host =
      make_host_tensors(problem.placement, dtype, layout.total_tokens(), problem.heads, problem.kv_heads, head_dim);
  const Inputs inputs = draw_inputs(layout, host, pattern);
  const bool nan_in_odd_segments = pattern == InputPattern::kNanInOddSegments;
  const float scale = dualkv::default_softmax_scale(head_dim);

  // out and lse as a forward pass would deliver them: the fp64 result stored in the dtype and
  // fp32. Every backward below (references and kernel) receives these same values.
  const oracle::ForwardResult forward = cpu_fp64_forward(layout, inputs.q, inputs.k, inputs.v, scale);
  for (int64_t t = 0; t < host.out.tokens; ++t) {
    for (int64_t h = 0; h < host.out.heads; ++h) {
      for (int64_t i = 0; i < host.out.head_dim; ++i) host.out.write(t, h, i, forward.out.at(t, h, i));
      host.lse.values[h * host.lse.head_stride + t] = static_cast<float>(forward.lse.at(t, h, 0));
    }
  }
  const DenseTensor out = to_dense(host.out);
  const DenseTensor lse = host.lse.to_dense();

  const oracle::Gradients fp64 = cpu_fp64_backward(layout, inputs.q, inputs.k, inputs.v, out, lse, inputs.dout, scale);
  const std::vector<oracle::CopiedSequence> sequences = reference_sequences_of(problem);
  const oracle::Gradients fp32 = ncopy_reference_backward(sequences, inputs.q, inputs.k, inputs.v, out, lse,
                                                          inputs.dout, scale, cuda_reference::OperandRounding::kNone);
  const oracle::Gradients rounded = ncopy_reference_backward(sequences, inputs.q, inputs.k, inputs.v, out, lse,
                                                             inputs.dout, scale, operand_rounding(dtype));
  const oracle::Gradients baseline{rounded_to(rounded.dq, dtype), rounded_to(rounded.dk, dtype),
                                   rounded_to(rounded.dv, dtype)};

  DeviceTensors device(host);
  for (const bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "deterministic backward" : "default backward");
    run_backward(layout, host, device, scale, deterministic, choice);
    ASSERT_TRUE(fully_written(host.dq)) << "dq";
    ASSERT_TRUE(fully_written(host.dk)) << "dk";
    ASSERT_TRUE(fully_written(host.dv)) << "dv";
    EXPECT_TRUE(nothing_written_outside_views(host));
    expect_inputs_unmodified(host, inputs);
    EXPECT_TRUE(identical(to_dense(host.out), out)) << "out (an input of the backward)";
    device.download_lse();
    EXPECT_TRUE(identical(host.lse.to_dense(), lse)) << "lse (an input of the backward)";
    expect_gradient("dq", to_dense(host.dq), baseline.dq, fp64.dq, fp32.dq, nan_in_odd_segments);
    expect_gradient("dk", to_dense(host.dk), baseline.dk, fp64.dk, fp32.dk, nan_in_odd_segments);
    expect_gradient("dv", to_dense(host.dv), baseline.dv, fp64.dv, fp32.dv, nan_in_odd_segments);
  }

  // dq, dk and dv share one storage in the fused placement; compare every gradient storage.
  std::vector<Storage> first_run;
  for (const StridedTensor* grad : {&host.dq, &host.dk, &host.dv}) first_run.push_back(*grad->storage);
  run_backward(layout, host, device, scale, true, choice);
  const StridedTensor* grads[] = {&host.dq, &host.dk, &host.dv};
  for (size_t g = 0; g < first_run.size(); ++g) {
    EXPECT_TRUE(bitwise_equal(first_run[g], *grads[g]->storage)) << "deterministic backward rerun, gradient " << g;
  }
}

}  // namespace dualkv_test
