// dualkv_demo: the attention operator alone, from C++. Builds a synthetic shared-prompt batch,
// runs forward and backward through dualkv on the packed layout and through the N-copy layout a
// standard trainer uses (the same inputs, copied), and prints the equivalence errors, the token
// and pair reductions, and both times. Runs on the GPU when this build has CUDA and a GPU is present,
// otherwise on the CPU.
#include <cmath>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/device_buffer.h"
#include "common/ncopy.h"
#include "common/runner.h"
#include "common/synthetic_batch.h"
#include "demo_options.h"

namespace dualkv::tools {
namespace {

// The (H, T) log-sum-exp of the N-copy run, moved back to packed rows (every copy of a prompt
// row must agree, so the comparison takes each copy against its packed row).
ErrorStats compare_lse(const std::vector<float>& packed, const std::vector<float>& ncopy_lse, const NCopyLayout& ncopy,
                       int64_t heads, int64_t packed_tokens) {
  const auto rows = static_cast<int64_t>(ncopy.source_row.size());
  std::vector<float> expected(heads * rows), actual(heads * rows);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t r = 0; r < rows; ++r) {
      actual[h * rows + r] = packed[h * packed_tokens + ncopy.source_row[r]];
      expected[h * rows + r] = ncopy_lse[h * rows + r];
    }
  }
  return compare(actual, expected);
}

void print_error(const char* name, const ErrorStats& e) {
  std::printf("  %-4s max abs err %.3e (max |ref| %.3e), relative L2 err %.3e\n", name, e.max_abs, e.max_ref,
              e.relative_l2);
}

// Forward and backward FLOPs of the pairs computed: 4*d*H per pair forward, 2.5x that backward.
double tflops(int64_t pairs, const BatchShape& s, double ms, double factor) {
  return factor * 4.0 * s.head_dim * s.heads * static_cast<double>(pairs) / (ms * 1e-3) / 1e12;
}

int run(int argc, char** argv) {
  const DemoOptions options = parse_demo_options(argc, argv);
  if (options.help) {
    std::printf("%s", demo_usage().c_str());
    return 0;
  }
  const BatchShape& shape = options.shape;
  const Device device = options.device;
  const bool on_cuda = device.kind == DeviceKind::kCuda;
  const RunSettings& timing = options.timing;

  const HostBatch batch = make_batch(shape);
  const NCopyLayout ncopy = make_ncopy(batch.layout);
  const Layout& packed = batch.layout;
  std::printf(
      "dualkv demo on %s, %s, G=%lld groups x N=%lld responses, P=%lld (group 0), R<=%lld%s, H=%lld, Hk=%lld, d=%lld\n",
      on_cuda ? "CUDA" : "CPU", dtype_name(shape.dtype), static_cast<long long>(shape.groups),
      static_cast<long long>(shape.responses), static_cast<long long>(shape.prompt),
      static_cast<long long>(shape.response), shape.ragged ? " (ragged)" : "", static_cast<long long>(shape.heads),
      static_cast<long long>(shape.kv_heads), static_cast<long long>(shape.head_dim));

  const int64_t q_width = shape.heads * shape.head_dim;
  const int64_t kv_width = shape.kv_heads * shape.head_dim;
  const AttentionInputs packed_inputs{batch.q,     batch.k,        batch.v,        batch.dout,
                                      shape.heads, shape.kv_heads, shape.head_dim, shape.dtype};
  const AttentionResult dual = run_attention(packed, packed_inputs, device, timing);

  const std::vector<float> nq = gather_rows(batch.q, q_width, ncopy);
  const std::vector<float> nk = gather_rows(batch.k, kv_width, ncopy);
  const std::vector<float> nv = gather_rows(batch.v, kv_width, ncopy);
  const std::vector<float> ndout = gather_rows_first_copy(batch.dout, q_width, ncopy);
  const AttentionInputs ncopy_inputs{nq, nk, nv, ndout, shape.heads, shape.kv_heads, shape.head_dim, shape.dtype};
  const AttentionResult base = run_attention(ncopy.layout, ncopy_inputs, device, timing);

  const int64_t tokens = packed.total_tokens();
  std::printf("\nequivalence, packed dualkv vs N-copy (prompt gradients summed over the copies):\n");
  const ErrorStats errors[] = {
      compare(gather_rows(dual.out, q_width, ncopy), base.out),
      compare_lse(dual.lse, base.lse, ncopy, shape.heads, tokens),
      compare(dual.dq, scatter_add_rows(base.dq, q_width, ncopy, tokens)),
      compare(dual.dk, scatter_add_rows(base.dk, kv_width, ncopy, tokens)),
      compare(dual.dv, scatter_add_rows(base.dv, kv_width, ncopy, tokens)),
  };
  const char* names[] = {"O", "LSE", "dQ", "dK", "dV"};
  bool finite = true;
  for (int i = 0; i < 5; ++i) {
    print_error(names[i], errors[i]);
    finite = finite && std::isfinite(errors[i].max_abs);
  }

  const int64_t pairs = packed.visible_pairs();
  const int64_t ncopy_pairs = packed.ncopy_pairs();
  std::printf(
      "\nwork: %lld packed tokens vs %lld N-copy tokens (%.2fx fewer); %lld vs %lld query-key pairs (%.2fx fewer)\n",
      static_cast<long long>(tokens), static_cast<long long>(packed.ncopy_tokens()),
      static_cast<double>(packed.ncopy_tokens()) / tokens, static_cast<long long>(pairs),
      static_cast<long long>(ncopy_pairs), static_cast<double>(ncopy_pairs) / pairs);
  std::printf(
      "time (median of %d, %d warm-up): forward %.2f ms vs %.2f ms (%.2fx), backward %.2f ms vs %.2f ms (%.2fx)\n",
      timing.repeats, timing.warmups, dual.forward_ms, base.forward_ms, base.forward_ms / dual.forward_ms,
      dual.backward_ms, base.backward_ms, base.backward_ms / dual.backward_ms);
  std::printf("rate on each layout's own pairs: dualkv %.3f / %.3f TFLOP/s, N-copy %.3f / %.3f TFLOP/s (fwd / bwd)\n",
              tflops(pairs, shape, dual.forward_ms, 1.0), tflops(pairs, shape, dual.backward_ms, 2.5),
              tflops(ncopy_pairs, shape, base.forward_ms, 1.0), tflops(ncopy_pairs, shape, base.backward_ms, 2.5));
  if (!finite) {
    std::printf("FAILED: an output holds NaN or was never written\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace dualkv::tools

int main(int argc, char** argv) {
  try {
    return dualkv::tools::run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "dualkv_demo: not enough host memory for this batch and its N-copy comparison; "
                 "use smaller --groups, --n, --p, --r, --heads or --head-dim\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dualkv_demo: %s\n%s", e.what(), dualkv::tools::demo_usage().c_str());
    return 2;
  }
}
