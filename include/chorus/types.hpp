// Chorus public C++ types: element types, reduction operators, status codes.
//
// The numeric values match the C ABI in chorus.h one for one, so the C layer
// converts with a static_cast after range-checking.
#pragma once

#include <chorus/export.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace chorus {

/// Element type of a buffer. Values equal chorusDataType_t.
enum class DataType : int {
  Int8 = 0,
  Uint8 = 1,
  Int32 = 2,
  Uint32 = 3,
  Int64 = 4,
  Uint64 = 5,
  Float16 = 6,
  Bfloat16 = 7,
  Float32 = 8,
  Float64 = 9,
};
inline constexpr int kNumDataTypes = 10;

/// Reduction operator. Values equal chorusRedOp_t.
/// Avg: floats divide the (fp32 for half types, else native) sum once by the
/// rank count; integers compute the sum in 64 bits and truncate toward zero.
enum class ReduceOp : int { Sum = 0, Prod = 1, Max = 2, Min = 3, Avg = 4 };
inline constexpr int kNumReduceOps = 5;

/// Outcome of an operation. Values equal chorusResult_t.
enum class Status : int {
  Success = 0,
  InvalidArgument = 1,
  InvalidUsage = 2,
  SystemError = 3,
  RemoteError = 4,  ///< a peer failed or went away
  Timeout = 5,
  Mismatch = 6,  ///< ranks called different collectives
  InternalError = 7,
  InProgress = 8,
};

/// True when `value` names a DataType. (Inline: every call path asks, several times.)
constexpr bool is_valid(DataType dtype) noexcept {
  return static_cast<int>(dtype) >= 0 && static_cast<int>(dtype) < kNumDataTypes;
}
constexpr bool is_valid(ReduceOp op) noexcept {
  return static_cast<int>(op) >= 0 && static_cast<int>(op) < kNumReduceOps;
}
/// Size in bytes of one element; 0 for a value outside the enum. (A switch, which the
/// compiler turns into one load from a read-only table: a local array would be rebuilt on
/// the stack at every call.)
constexpr std::size_t dtype_size(DataType dtype) noexcept {
  switch (dtype) {
    case DataType::Int8:
    case DataType::Uint8:
      return 1;
    case DataType::Float16:
    case DataType::Bfloat16:
      return 2;
    case DataType::Int32:
    case DataType::Uint32:
    case DataType::Float32:
      return 4;
    case DataType::Int64:
    case DataType::Uint64:
    case DataType::Float64:
      return 8;
  }
  return 0;
}
/// Lower-case names: "int8" .. "float64"; "sum" .. "avg"; "success" .. "in progress".
CHORUS_EXPORT std::string_view to_string(DataType dtype) noexcept;
CHORUS_EXPORT std::string_view to_string(ReduceOp op) noexcept;
CHORUS_EXPORT std::string_view to_string(Status status) noexcept;
/// Parses a name as printed by to_string (also "fp16", "bf16", "fp32", "fp64",
/// "float", "double", "half", "int", "uint"); returns false when unknown.
CHORUS_EXPORT bool parse_dtype(std::string_view name, DataType* out) noexcept;
CHORUS_EXPORT bool parse_reduce_op(std::string_view name, ReduceOp* out) noexcept;

}  // namespace chorus
