// Partial results in float32 for half types; see partials.hpp.
#include "algorithms/partials.hpp"

#include "algorithms/common.hpp"
#include "core/reduce.hpp"

#include <algorithm>
#include <array>

namespace chorus::algorithms {
namespace {

/// Elements converted and reduced at a time: three float32 blocks of 8 KiB stay in L1.
constexpr std::size_t kBlock = 2048;

using Block = std::array<float, kBlock>;

bool is_half(DataType t) { return t == DataType::Float16 || t == DataType::Bfloat16; }

/// Elements [first, first + count) of `x` as float32: in place when `x` holds float32,
/// else converted into `block`.
const float* as_float(Operand x, std::size_t first, std::size_t count, Block& block) {
  const void* at = element_at(x.data, first, x.dtype);
  if (x.dtype == DataType::Float32) return static_cast<const float*>(at);
  convert(at, x.dtype, block.data(), DataType::Float32, count);
  return block.data();
}

}  // namespace

int fold_half_average(const Call& args, int nranks) {
  if (!args.average || partial_type(args) == args.dtype) return 1;
  return nranks;
}

void reduce_operands(void* dst, DataType dst_type, Operand a, Operand b, std::size_t count,
                     ReduceOp op, int divisor) {
  const bool same = a.dtype == dst_type && b.dtype == dst_type;
  if (same && (divisor <= 1 || !is_half(dst_type))) {
    reduce_into(dst, a.data, b.data, count, dst_type, op);
    if (divisor > 1) finalize_average(dst, count, dst_type, divisor);
    return;
  }
  Block x, y;
  for (std::size_t first = 0; first < count; first += kBlock) {
    const std::size_t c = std::min(kBlock, count - first);
    const float* left = as_float(a, first, c, x);
    const float* right = as_float(b, first, c, y);
    void* out = element_at(dst, first, dst_type);
    float* sum = dst_type == DataType::Float32 ? static_cast<float*>(out) : x.data();
    reduce_into(sum, left, right, c, DataType::Float32, op);
    if (divisor > 1) finalize_average(sum, c, DataType::Float32, divisor);
    if (sum != out) convert(sum, DataType::Float32, out, dst_type, c);
  }
}

void reduce_all(void* out, std::span<const void* const> inputs, std::size_t count, const Call& args,
                int divisor) {
  const DataType dtype = args.dtype;
  const DataType partial = partial_type(args);
  if (partial != dtype && divisor <= 1) {
    // One pass: each input widened in registers, reduced in fp32, rounded once.
    return reduce_halves(out, inputs.data(), inputs.size(), count, dtype, args.op);
  }
  if (partial == dtype) {
    reduce_into(out, inputs[0], inputs[1], count, dtype, args.op);
    for (std::size_t k = 2; k < inputs.size(); ++k) {
      reduce_inplace(out, inputs[k], count, dtype, args.op);
    }
    if (divisor > 1) finalize_average(out, count, dtype, divisor);
    return;
  }
  Block sum, term;
  for (std::size_t first = 0; first < count; first += kBlock) {
    const std::size_t c = std::min(kBlock, count - first);
    convert(element_at(inputs[0], first, dtype), dtype, sum.data(), DataType::Float32, c);
    for (std::size_t k = 1; k < inputs.size(); ++k) {
      convert(element_at(inputs[k], first, dtype), dtype, term.data(), DataType::Float32, c);
      reduce_inplace(sum.data(), term.data(), c, DataType::Float32, args.op);
    }
    if (divisor > 1) finalize_average(sum.data(), c, DataType::Float32, divisor);
    convert(sum.data(), DataType::Float32, element_at(out, first, dtype), dtype, c);
  }
}

void store_final(void* dst, void* src, std::size_t count, const Call& args, int divisor) {
  const DataType partial = partial_type(args);
  if (divisor > 1) finalize_average(src, count, partial, divisor);
  convert(src, partial, dst, args.dtype, count);
}

}  // namespace chorus::algorithms
