// Partial results wider than the caller's dtype. A float16/bfloat16 Sum or Prod (an Avg
// arrives as Sum) is computed in fp32 and rounded to the half type once per element, where
// that element's final value is produced (core/reduce.hpp). An algorithm that accumulates
// halves itself (Algorithm::folding, not Folding::None) therefore moves a rank's unreduced input
// and the final values in the caller's dtype, and any partial result (a reduction over some but not
// all ranks) in fp32: rounding a partial to the half type would round that element twice, and the
// result would depend on the algorithm. It also divides an average before that one rounding
// (fold_half_average).
#pragma once

#include "algorithms/algorithm.hpp"
#include "core/reduce.hpp"

#include <chorus/types.hpp>

#include <array>
#include <cstddef>
#include <span>
#include <vector>

namespace chorus::algorithms {

/// The dtype partial results of `args` are carried in: float32 for a half type under Sum or
/// Prod, args.dtype otherwise. Inline: every reducing call asks it.
inline DataType partial_type(const Call& args) {
  if (args.dtype != DataType::Float16 && args.dtype != DataType::Bfloat16) return args.dtype;
  const DataType wide = accumulation_type(args.dtype, args.op);
  return wide == DataType::Float32 ? wide : args.dtype;
}

/// An average of a half type is divided by the algorithm, before its one rounding: returns
/// the divisor for the final values (`nranks`), 1 for any other call (the Outcome then says
/// the average was divided: Algorithm::folds_average). Every rank of an algorithm that
/// accumulates halves calls it.
int fold_half_average(const Call& args, int nranks);

/// `count` elements of `dtype`.
struct Operand {
  const void* data;
  DataType dtype;
};

/// dst (elements of `dst_type`) = a op b, computed in float32 when any of the three is a
/// half type under Sum or Prod (rounded once into dst), else in their common dtype; with
/// `divisor` > 1 divided by it before it is stored. dst may be a or b when it has their
/// dtype; no other overlap.
void reduce_operands(void* dst, DataType dst_type, Operand a, Operand b, std::size_t count,
                     ReduceOp op, int divisor = 1);

/// The input pointers of one reduce_all. Up to kInline of them live in the object itself, so
/// a call on a host of up to that many ranks allocates nothing; more go to the heap.
class Operands {
 public:
  static constexpr std::size_t kInline = 16;
  /// Room for `capacity` pointers.
  explicit Operands(std::size_t capacity) : heap_(capacity > kInline ? capacity : 0) {}
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;
  /// Adds one; at most `capacity` in all.
  void push_back(const void* input) { data()[size_++] = input; }
  operator std::span<const void* const>() { return {data(), size_}; }

 private:
  const void** data() { return heap_.empty() ? inline_.data() : heap_.data(); }
  std::array<const void*, kInline> inline_;  ///< [0, size_) written: no zeroing per call
  std::vector<const void*> heap_;
  std::size_t size_ = 0;
};

/// out (args.dtype) = inputs[0] op inputs[1] op ... (each `count` elements of args.dtype,
/// at least two), in partial_type(args), divided by `divisor` when it is > 1, rounded once.
/// Half types take one pass (core's reduce_halves: widened in registers), or, for an average,
/// a few KiB at a time through fp32 blocks that stay in L1. `out` may be one of the inputs.
void reduce_all(void* out, std::span<const void* const> inputs, std::size_t count, const Call& args,
                int divisor);

/// dst (args.dtype) = src (partial_type(args)) divided by `divisor` when it is > 1, rounded
/// once; src is divided in place.
void store_final(void* dst, void* src, std::size_t count, const Call& args, int divisor);

}  // namespace chorus::algorithms
