// Reduction kernels. Plain loops over restrict-free spans that g++ vectorises at
// -O2/-O3; half types go through fp32 one element at a time.
#include "core/reduce.hpp"

#include "core/half.hpp"

#include <chorus/error.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace chorus {
namespace {

// Integer sum and product wrap like unsigned arithmetic (no signed overflow UB).
template <typename T>
T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename T>
T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <typename T, typename F>
void apply(T* dst, const T* a, const T* b, std::size_t n, F f) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = f(a[i], b[i]);
}

template <typename T>
void reduce_typed(T* dst, const T* a, const T* b, std::size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return apply(dst, a, b, n, [](T x, T y) { return wrap_add(x, y); });
    case ReduceOp::Prod: return apply(dst, a, b, n, [](T x, T y) { return wrap_mul(x, y); });
    case ReduceOp::Max: return apply(dst, a, b, n, [](T x, T y) { return x < y ? y : x; });
    case ReduceOp::Min: return apply(dst, a, b, n, [](T x, T y) { return y < x ? y : x; });
    case ReduceOp::Avg: break;
  }
  throw Error(Status::InternalError, "reduce kernel called with avg; callers lower it to sum");
}

// Half types: widen a block to fp32, reduce, narrow once.
template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void reduce_half(std::uint16_t* dst, const std::uint16_t* a, const std::uint16_t* b, std::size_t n,
                 ReduceOp op) {
  constexpr std::size_t kBlock = 256;
  float fa[kBlock], fb[kBlock];
  for (std::size_t base = 0; base < n; base += kBlock) {
    std::size_t m = n - base < kBlock ? n - base : kBlock;
    for (std::size_t i = 0; i < m; ++i) {
      fa[i] = ToFloat(a[base + i]);
      fb[i] = ToFloat(b[base + i]);
    }
    reduce_typed(fa, fa, fb, m, op);
    for (std::size_t i = 0; i < m; ++i) dst[base + i] = FromFloat(fa[i]);
  }
}

template <typename T>
void reduce_as(void* dst, const void* a, const void* b, std::size_t n, ReduceOp op) {
  reduce_typed(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), n, op);
}

template <typename From, typename To>
void convert_as(const void* src, void* dst, std::size_t n) {
  const From* s = static_cast<const From*>(src);
  To* d = static_cast<To*>(dst);
  for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<To>(s[i]);
}

bool is_signed_int(DataType t) {
  return t == DataType::Int8 || t == DataType::Int32 || t == DataType::Int64;
}
bool is_unsigned_int(DataType t) {
  return t == DataType::Uint8 || t == DataType::Uint32 || t == DataType::Uint64;
}

// Integer dtype <-> 64-bit integer of the same signedness.
template <typename Wide>
bool convert_integer(const void* src, DataType from, void* dst, DataType to, std::size_t n) {
  switch (from) {
    case DataType::Int8: convert_as<std::int8_t, Wide>(src, dst, n); return true;
    case DataType::Uint8: convert_as<std::uint8_t, Wide>(src, dst, n); return true;
    case DataType::Int32: convert_as<std::int32_t, Wide>(src, dst, n); return true;
    case DataType::Uint32: convert_as<std::uint32_t, Wide>(src, dst, n); return true;
    default: break;
  }
  switch (to) {
    case DataType::Int8: convert_as<Wide, std::int8_t>(src, dst, n); return true;
    case DataType::Uint8: convert_as<Wide, std::uint8_t>(src, dst, n); return true;
    case DataType::Int32: convert_as<Wide, std::int32_t>(src, dst, n); return true;
    case DataType::Uint32: convert_as<Wide, std::uint32_t>(src, dst, n); return true;
    default: return false;
  }
}

bool convert_half(const void* src, DataType from, void* dst, DataType to, std::size_t n) {
  if (to == DataType::Float32) {
    const auto* s = static_cast<const std::uint16_t*>(src);
    auto* d = static_cast<float*>(dst);
    if (from == DataType::Float16) for (std::size_t i = 0; i < n; ++i) d[i] = half_to_float(s[i]);
    else for (std::size_t i = 0; i < n; ++i) d[i] = bf16_to_float(s[i]);
    return true;
  }
  if (from == DataType::Float32) {
    const auto* s = static_cast<const float*>(src);
    auto* d = static_cast<std::uint16_t*>(dst);
    if (to == DataType::Float16) for (std::size_t i = 0; i < n; ++i) d[i] = float_to_half(s[i]);
    else for (std::size_t i = 0; i < n; ++i) d[i] = float_to_bf16(s[i]);
    return true;
  }
  return false;
}

bool is_half(DataType t) { return t == DataType::Float16 || t == DataType::Bfloat16; }

template <typename T>
void divide_as(void* buf, std::size_t n, int divisor) {
  T* p = static_cast<T*>(buf);
  if constexpr (std::is_floating_point_v<T>) {
    for (std::size_t i = 0; i < n; ++i) p[i] = p[i] / static_cast<T>(divisor);
  } else {
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(divisor));
  }
}

}  // namespace

void reduce_into(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                 ReduceOp op) {
  using std::int8_t, std::uint8_t, std::int32_t, std::uint32_t, std::int64_t, std::uint64_t;
  switch (dtype) {
    case DataType::Int8: return reduce_as<int8_t>(dst, a, b, count, op);
    case DataType::Uint8: return reduce_as<uint8_t>(dst, a, b, count, op);
    case DataType::Int32: return reduce_as<int32_t>(dst, a, b, count, op);
    case DataType::Uint32: return reduce_as<uint32_t>(dst, a, b, count, op);
    case DataType::Int64: return reduce_as<int64_t>(dst, a, b, count, op);
    case DataType::Uint64: return reduce_as<uint64_t>(dst, a, b, count, op);
    case DataType::Float32: return reduce_as<float>(dst, a, b, count, op);
    case DataType::Float64: return reduce_as<double>(dst, a, b, count, op);
    case DataType::Float16:
      return reduce_half<half_to_float, float_to_half>(static_cast<uint16_t*>(dst),
                                                       static_cast<const uint16_t*>(a),
                                                       static_cast<const uint16_t*>(b), count, op);
    case DataType::Bfloat16:
      return reduce_half<bf16_to_float, float_to_bf16>(static_cast<uint16_t*>(dst),
                                                       static_cast<const uint16_t*>(a),
                                                       static_cast<const uint16_t*>(b), count, op);
  }
  throw Error(Status::InternalError, "reduce kernel called with an unknown dtype");
}

void reduce_inplace(void* dst, const void* src, std::size_t count, DataType dtype, ReduceOp op) {
  reduce_into(dst, dst, src, count, dtype, op);
}

void convert(const void* src, DataType from, void* dst, DataType to, std::size_t count) {
  if (from == to) {
    if (src != dst) std::memmove(dst, src, count * dtype_size(from));
    return;
  }
  bool done = false;
  if (is_half(from) || is_half(to)) done = convert_half(src, from, dst, to, count);
  else if (is_signed_int(from) || is_signed_int(to)) done = (from == DataType::Int64 || to == DataType::Int64) && convert_integer<std::int64_t>(src, from, dst, to, count);
  else if (is_unsigned_int(from) || is_unsigned_int(to)) done = (from == DataType::Uint64 || to == DataType::Uint64) && convert_integer<std::uint64_t>(src, from, dst, to, count);
  if (!done) {
    throw Error(Status::InternalError, "no conversion from " + std::string(to_string(from)) +
                                           " to " + std::string(to_string(to)));
  }
}

DataType accumulation_type(DataType dtype, ReduceOp op) noexcept {
  if (is_half(dtype) && op != ReduceOp::Max && op != ReduceOp::Min) return DataType::Float32;
  if (op != ReduceOp::Avg) return dtype;
  if (dtype == DataType::Int8 || dtype == DataType::Int32) return DataType::Int64;
  if (dtype == DataType::Uint8 || dtype == DataType::Uint32) return DataType::Uint64;
  return dtype;
}

void finalize_average(void* buf, std::size_t count, DataType dtype, int divisor) {
  switch (dtype) {
    case DataType::Int8: return divide_as<std::int8_t>(buf, count, divisor);
    case DataType::Uint8: return divide_as<std::uint8_t>(buf, count, divisor);
    case DataType::Int32: return divide_as<std::int32_t>(buf, count, divisor);
    case DataType::Uint32: return divide_as<std::uint32_t>(buf, count, divisor);
    case DataType::Int64: return divide_as<std::int64_t>(buf, count, divisor);
    case DataType::Uint64: return divide_as<std::uint64_t>(buf, count, divisor);
    case DataType::Float32: return divide_as<float>(buf, count, divisor);
    case DataType::Float64: return divide_as<double>(buf, count, divisor);
    case DataType::Float16:
    case DataType::Bfloat16: break;
  }
  throw Error(Status::InternalError, "finalize_average on " + std::string(to_string(dtype)) +
                                         "; half types are averaged in float32");
}

}  // namespace chorus
