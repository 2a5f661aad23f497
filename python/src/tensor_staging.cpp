// Tensor <-> Chorus wire conversion; see tensor_staging.hpp.
#include "tensor_staging.hpp"

#include <c10/util/Exception.h>

namespace chorus_torch {

Wire wire_of(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.device().is_cpu(), "chorus: ", op, " needs CPU tensors, got one on ", t.device());
  TORCH_CHECK(!t.is_sparse(), "chorus: ", op, " does not support sparse tensors");
  using chorus::DataType;
  switch (t.scalar_type()) {
    case at::kChar:
      return {DataType::Int8, 1};
    case at::kByte:
      return {DataType::Uint8, 1};
    case at::kBool:
      return {DataType::Uint8, 1};
    case at::kInt:
      return {DataType::Int32, 1};
    case at::kLong:
      return {DataType::Int64, 1};
    case at::kHalf:
      return {DataType::Float16, 1};
    case at::kBFloat16:
      return {DataType::Bfloat16, 1};
    case at::kFloat:
      return {DataType::Float32, 1};
    case at::kDouble:
      return {DataType::Float64, 1};
    case at::kComplexFloat:
      return {DataType::Float32, 2};
    case at::kComplexDouble:
      return {DataType::Float64, 2};
    default:
      TORCH_CHECK(false, "chorus: ", op, " does not support dtype ", t.scalar_type(),
                  " (supported: int8, uint8, bool, int32, int64, float16, bfloat16, float32, "
                  "float64, complex64, complex128)");
  }
}

namespace {

/// bool travels as uint8 holding 0/1: OR is MAX, AND is MIN.
chorus::ReduceOp bool_op(c10d::ReduceOp::RedOpType op, const char* name) {
  switch (op) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::MAX:
    case c10d::ReduceOp::BOR:
      return chorus::ReduceOp::Max;
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::BAND:
      return chorus::ReduceOp::Min;
    default:
      TORCH_CHECK(false, "chorus: ", name, " does not support this ReduceOp on bool tensors");
  }
}

}  // namespace

chorus::ReduceOp wire_op(const c10d::ReduceOp& op, at::ScalarType type, const char* name) {
  if (type == at::kBool) return bool_op(op.op_, name);
  const bool complex = at::isComplexType(type);
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return chorus::ReduceOp::Sum;
    case c10d::ReduceOp::AVG:
      return chorus::ReduceOp::Avg;
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX:
      // Complex values travel as independent reals, so only component-wise linear ops are right.
      TORCH_CHECK(!complex, "chorus: ", name, " supports only SUM and AVG on complex tensors");
      if (op.op_ == c10d::ReduceOp::PRODUCT) return chorus::ReduceOp::Prod;
      return op.op_ == c10d::ReduceOp::MIN ? chorus::ReduceOp::Min : chorus::ReduceOp::Max;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(false, "chorus: ", name,
                  " does not support the bitwise ReduceOps BAND, BOR, BXOR");
    default:
      TORCH_CHECK(false, "chorus: ", name,
                  " does not support ReduceOp PREMUL_SUM (supported: SUM, PRODUCT, MIN, MAX, AVG)");
  }
}

void require_one(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "chorus: ", op, " takes exactly one tensor per process, got ",
              tensors.size());
}

void require_like(const std::vector<at::Tensor>& tensors, at::ScalarType type, int64_t numel,
                  const char* op) {
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.scalar_type() == type, "chorus: ", op, ": tensor dtype ", t.scalar_type(),
                " differs from ", type);
    TORCH_CHECK(t.numel() == numel, "chorus: ", op, ": tensor has ", t.numel(),
                " elements, expected ", numel);
    wire_of(t, op);
  }
}

at::Tensor contiguous_input(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

std::function<void()> copy_back(const at::Tensor& target, const at::Tensor& staged) {
  if (target.is_same(staged)) return {};
  return [target, staged]() mutable { target.copy_(staged); };
}

at::Tensor concat_flat(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const at::Tensor& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

int64_t split_flat(const at::Tensor& source, int64_t offset,
                   const std::vector<at::Tensor>& targets) {
  for (at::Tensor target : targets) {
    target.copy_(source.narrow(0, offset, target.numel()).view(target.sizes()));
    offset += target.numel();
  }
  return offset;
}

std::vector<std::size_t> displacements(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> out(counts.size(), 0);
  for (std::size_t i = 1; i < counts.size(); ++i) out[i] = out[i - 1] + counts[i - 1];
  return out;
}

}  // namespace chorus_torch
