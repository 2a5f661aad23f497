// Names and sizes of the public enums.
#include <chorus/types.hpp>

#include <array>

namespace chorus {
namespace {

constexpr std::array<std::string_view, kNumDataTypes> kTypeNames = {
    "int8",   "uint8",   "int32",    "uint32",  "int64",
    "uint64", "float16", "bfloat16", "float32", "float64"};
constexpr std::array<std::string_view, kNumReduceOps> kOpNames = {"sum", "prod", "max", "min",
                                                                  "avg"};
constexpr std::array<std::string_view, 9> kStatusNames = {
    "success", "invalid argument", "invalid usage",  "system error", "remote error",
    "timeout", "mismatch",         "internal error", "in progress"};

struct Alias {
  std::string_view name;
  DataType dtype;
};
constexpr std::array<Alias, 8> kTypeAliases = {{{"fp16", DataType::Float16},
                                                {"half", DataType::Float16},
                                                {"bf16", DataType::Bfloat16},
                                                {"fp32", DataType::Float32},
                                                {"float", DataType::Float32},
                                                {"fp64", DataType::Float64},
                                                {"double", DataType::Float64},
                                                {"int", DataType::Int32}}};

}  // namespace

std::string_view to_string(DataType dtype) noexcept {
  return is_valid(dtype) ? kTypeNames[static_cast<int>(dtype)] : "unknown dtype";
}

std::string_view to_string(ReduceOp op) noexcept {
  return is_valid(op) ? kOpNames[static_cast<int>(op)] : "unknown op";
}

std::string_view to_string(Status status) noexcept {
  int v = static_cast<int>(status);
  return v >= 0 && v < static_cast<int>(kStatusNames.size()) ? kStatusNames[v] : "unknown status";
}

bool parse_dtype(std::string_view name, DataType* out) noexcept {
  for (int i = 0; i < kNumDataTypes; ++i) {
    if (kTypeNames[i] == name) {
      *out = static_cast<DataType>(i);
      return true;
    }
  }
  for (const Alias& alias : kTypeAliases) {
    if (alias.name == name) {
      *out = alias.dtype;
      return true;
    }
  }
  if (name == "uint") {
    *out = DataType::Uint32;
    return true;
  }
  return false;
}

bool parse_reduce_op(std::string_view name, ReduceOp* out) noexcept {
  for (int i = 0; i < kNumReduceOps; ++i) {
    if (kOpNames[i] == name) {
      *out = static_cast<ReduceOp>(i);
      return true;
    }
  }
  return false;
}

}  // namespace chorus
