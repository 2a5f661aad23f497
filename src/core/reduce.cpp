// The public reduction entry points (dispatching to the kernel chosen at run
// time, see reduce_kernels.hpp), conversions between dtypes, and averaging.
#include "core/reduce.hpp"

#include "core/reduce_kernels.hpp"

#include <chorus/error.hpp>

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace chorus {
namespace {

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
    case DataType::Int8:
      convert_as<std::int8_t, Wide>(src, dst, n);
      return true;
    case DataType::Uint8:
      convert_as<std::uint8_t, Wide>(src, dst, n);
      return true;
    case DataType::Int32:
      convert_as<std::int32_t, Wide>(src, dst, n);
      return true;
    case DataType::Uint32:
      convert_as<std::uint32_t, Wide>(src, dst, n);
      return true;
    default:
      break;
  }
  switch (to) {
    case DataType::Int8:
      convert_as<Wide, std::int8_t>(src, dst, n);
      return true;
    case DataType::Uint8:
      convert_as<Wide, std::uint8_t>(src, dst, n);
      return true;
    case DataType::Int32:
      convert_as<Wide, std::int32_t>(src, dst, n);
      return true;
    case DataType::Uint32:
      convert_as<Wide, std::uint32_t>(src, dst, n);
      return true;
    default:
      return false;
  }
}

bool is_half(DataType t) { return t == DataType::Float16 || t == DataType::Bfloat16; }

/// p[i] / d for floats, correctly rounded like the scalar division: by a power of two d that
/// is p[i] * (1 / d) exactly (the reciprocal is exact), otherwise a division, four (two)
/// lanes at a time where SSE2 exists (every x86-64).
template <typename T>
void divide_floats(T* p, std::size_t n, T d) {
  const bool power_of_two = std::has_single_bit(static_cast<unsigned long long>(d));
  const T reciprocal = T(1) / d;
  std::size_t i = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    const __m128 v = _mm_set1_ps(power_of_two ? reciprocal : d);
    for (; i + 4 <= n; i += 4) {
      const __m128 x = _mm_loadu_ps(p + i);
      _mm_storeu_ps(p + i, power_of_two ? _mm_mul_ps(x, v) : _mm_div_ps(x, v));
    }
  } else {
    const __m128d v = _mm_set1_pd(power_of_two ? reciprocal : d);
    for (; i + 2 <= n; i += 2) {
      const __m128d x = _mm_loadu_pd(p + i);
      _mm_storeu_pd(p + i, power_of_two ? _mm_mul_pd(x, v) : _mm_div_pd(x, v));
    }
  }
#endif
  for (; i < n; ++i) p[i] = power_of_two ? p[i] * reciprocal : p[i] / d;
}

template <typename T>
void divide_as(void* buf, std::size_t n, int divisor) {
  T* p = static_cast<T*>(buf);
  if constexpr (std::is_floating_point_v<T>) {
    divide_floats(p, n, static_cast<T>(divisor));
  } else {
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(divisor));
  }
}

}  // namespace

void reduce_into_kernels(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                         ReduceOp op) {
  // Resolved on first use; C++ guarantees one thread initialises it and the
  // others wait, and later calls cost one load.
  static const ReduceKernel kernel = reduce_kernel(active_reduce_isa());
  // Less than one 256-bit vector: the SIMD kernels would hand all of it to the generic
  // kernel's tail loop anyway (same values), after two more dispatches.
  if (count * dtype_size(dtype) < 32) return reduce_into_generic(dst, a, b, count, dtype, op);
  kernel(dst, a, b, count, dtype, op);
}

void reduce_halves(void* out, const void* const* inputs, std::size_t n, std::size_t count,
                   DataType dtype, ReduceOp op) {
  static const ReduceHalvesKernel kernel = reduce_halves_kernel(active_reduce_isa());
  if (!kernel(out, inputs, n, count, dtype, op)) {
    throw Error(Status::InternalError, "reduce_halves of " + std::string(to_string(dtype)) + " " +
                                           std::string(to_string(op)) +
                                           "; only float16/bfloat16 sum and prod");
  }
}

void convert(const void* src, DataType from, void* dst, DataType to, std::size_t count) {
  if (from == to) {
    if (src != dst) std::memmove(dst, src, count * dtype_size(from));
    return;
  }
  bool done = false;
  if (is_half(from) || is_half(to)) {
    // Resolved on first use, like reduce_into's kernel.
    static const ConvertKernel kernel = convert_half_kernel(active_reduce_isa());
    done = kernel(src, from, dst, to, count);
  } else if (is_signed_int(from) || is_signed_int(to)) {
    done = (from == DataType::Int64 || to == DataType::Int64) &&
           convert_integer<std::int64_t>(src, from, dst, to, count);
  } else if (is_unsigned_int(from) || is_unsigned_int(to)) {
    done = (from == DataType::Uint64 || to == DataType::Uint64) &&
           convert_integer<std::uint64_t>(src, from, dst, to, count);
  }
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
    case DataType::Int8:
      return divide_as<std::int8_t>(buf, count, divisor);
    case DataType::Uint8:
      return divide_as<std::uint8_t>(buf, count, divisor);
    case DataType::Int32:
      return divide_as<std::int32_t>(buf, count, divisor);
    case DataType::Uint32:
      return divide_as<std::uint32_t>(buf, count, divisor);
    case DataType::Int64:
      return divide_as<std::int64_t>(buf, count, divisor);
    case DataType::Uint64:
      return divide_as<std::uint64_t>(buf, count, divisor);
    case DataType::Float32:
      return divide_as<float>(buf, count, divisor);
    case DataType::Float64:
      return divide_as<double>(buf, count, divisor);
    case DataType::Float16:
    case DataType::Bfloat16:
      break;
  }
  throw Error(Status::InternalError, "finalize_average on " + std::string(to_string(dtype)) +
                                         "; half types are averaged in float32");
}

}  // namespace chorus
