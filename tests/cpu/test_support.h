// Shared helpers of the CPU suite: deterministic randomness, strided tensors over caller-owned
// storage in any dtype, conversion to the oracles' fp64 tensors, and comparisons in which NaN
// never passes.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cpu/batch_spec.h"
#include "cpu/oracle_attention.h"
#include "dualkv/dualkv.h"

namespace dualkv_test {

using oracle::DenseTensor;

// A generator seeded from the running test's full name, so every test draws fresh but
// reproducible inputs, independent of test order and filters.
std::mt19937_64 rng_for_current_test();

dualkv::Layout make_layout(const BatchSpec& batch);

// Machine epsilon (distance from 1 to the next value) of a storage dtype or accumulation mode.
double dtype_epsilon(dualkv::DType dtype);
double accumulation_epsilon(dualkv::Accumulation accumulation);

// Typed, element-addressed memory that several views may share (e.g. a fused QKV buffer).
class Storage {
 public:
  Storage(dualkv::DType dtype, int64_t elements);

  dualkv::DType dtype() const { return dtype_; }
  int64_t elements() const { return elements_; }
  void* data() { return bytes_.data(); }
  const std::vector<unsigned char>& bytes() const { return bytes_; }

  double read(int64_t index) const;
  // Rounds to the dtype (round to nearest even), as the caller's framework would.
  void write(int64_t index, double value);
  // Fills every element with a NaN bit pattern that no computation produces, so that an element
  // the library writes, even with NaN, can be told apart from one it never touched.
  void poison();
  bool is_poison(int64_t index) const;

 private:
  dualkv::DType dtype_;
  int64_t elements_;
  std::vector<unsigned char> bytes_;
};

// A (tokens, heads, head_dim) view into a Storage, head_dim contiguous.
struct StridedTensor {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;
  int64_t tokens = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t token_stride = 0;
  int64_t head_stride = 0;

  int64_t index(int64_t t, int64_t h, int64_t i) const { return offset + t * token_stride + h * head_stride + i; }
  double read(int64_t t, int64_t h, int64_t i) const { return storage->read(index(t, h, i)); }
  void write(int64_t t, int64_t h, int64_t i, double value) { storage->write(index(t, h, i), value); }

  dualkv::InputTensor input() const;
  dualkv::OutputTensor output() const;
};

// Uniform values in [-1, 1), rounded to the view's dtype.
void fill_uniform(StridedTensor& tensor, std::mt19937_64& rng);

// The exact values held by the view (after dtype rounding), in fp64.
DenseTensor to_dense(const StridedTensor& tensor);

// The LSE output, (heads, tokens) fp32 with a possibly padded head stride.
struct LseBuffer {
  int64_t heads = 0;
  int64_t tokens = 0;
  int64_t head_stride = 0;
  std::vector<float> values;

  LseBuffer(int64_t heads_, int64_t tokens_, int64_t head_stride_);
  void poison();
  dualkv::LseOutput output();
  dualkv::LseInput input() const;
  // As an oracle-shaped (tokens, heads, 1) tensor.
  DenseTensor to_dense() const;
  // Elements of the padding between heads that were written to.
  int64_t count_padding_written() const;
};

// Elements of `storage` outside all of `views` that no longer hold the poison pattern.
int64_t count_written_outside(const Storage& storage, const std::vector<const StridedTensor*>& views);

// Passes iff every element satisfies |actual - expected| <= tolerance * (|expected| + rms) with
// rms the root mean square of `expected`; NaN or infinity anywhere fails. The message locates
// the worst element.
::testing::AssertionResult all_close(const DenseTensor& actual, const DenseTensor& expected, double tolerance);

}  // namespace dualkv_test
