// Every SIMD reduction kernel the machine supports must give the generic
// kernel's bits for every dtype x op, every length 0..300, vector-misaligned
// pointers, and in place (dst == a, dst == b). The one allowed difference is a
// NaN's payload: where the generic result is a NaN, the SIMD one must be a NaN.
#include "core/half.hpp"
#include "core/reduce.hpp"
#include "core/reduce_kernels.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace chorus {
namespace {

constexpr DataType kDtypes[] = {
    DataType::Int8,   DataType::Uint8,   DataType::Int32,    DataType::Uint32,  DataType::Int64,
    DataType::Uint64, DataType::Float16, DataType::Bfloat16, DataType::Float32, DataType::Float64};
constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min};
constexpr std::size_t kMaxLength = 300;
constexpr std::size_t kMaxShift = 3;  // element offsets that break 16/32/64-byte alignment

bool is_nan(DataType dtype, const std::uint8_t* p) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, p, dtype_size(dtype));
  switch (dtype) {
    case DataType::Float16:
      return (bits & 0x7fffu) > 0x7c00u;
    case DataType::Bfloat16:
      return (bits & 0x7fffu) > 0x7f80u;
    case DataType::Float32:
      return (bits & 0x7fffffffu) > 0x7f800000u;
    case DataType::Float64:
      return (bits & 0x7fffffffffffffffu) > 0x7ff0000000000000u;
    default:
      return false;
  }
}

// One random element: half the time raw random bits (every exponent, NaN, inf,
// subnormals, and all integer bit patterns), else a small value in steps of
// 1/4 (exact sums that cancel to +-0, equal operands for max/min ties).
void random_element(DataType dtype, std::mt19937_64& rng, std::uint8_t* out) {
  std::uint64_t bits = rng();
  if (bits & 1u) {
    std::memcpy(out, &bits, dtype_size(dtype));
    return;
  }
  double small = static_cast<double>(static_cast<int>((bits >> 8) % 33) - 16) / 4.0;
  switch (dtype) {
    case DataType::Float16: {
      auto h = float_to_half(static_cast<float>(small));
      std::memcpy(out, &h, 2);
      return;
    }
    case DataType::Bfloat16: {
      auto h = float_to_bf16(static_cast<float>(small));
      std::memcpy(out, &h, 2);
      return;
    }
    case DataType::Float32: {
      auto f = static_cast<float>(small);
      std::memcpy(out, &f, 4);
      return;
    }
    case DataType::Float64:
      std::memcpy(out, &small, 8);
      return;
    default: {
      auto v = static_cast<std::int64_t>(small * 4.0);
      std::memcpy(out, &v, dtype_size(dtype));  // little-endian: the low bytes
      return;
    }
  }
}

std::vector<std::uint8_t> random_buffer(DataType dtype, std::size_t count, std::mt19937_64& rng) {
  std::vector<std::uint8_t> bytes(count * dtype_size(dtype));
  for (std::size_t i = 0; i < count; ++i)
    random_element(dtype, rng, bytes.data() + i * dtype_size(dtype));
  return bytes;
}

// Where a kernel writes its result relative to its inputs.
enum class Placement { OutOfPlace, IntoA, IntoB };

struct Case {
  DataType dtype;
  ReduceOp op;
  std::size_t length;
  std::size_t shift;  // elements; a, b and dst are shifted by shift, shift+1, shift+2 (mod 4)
  Placement placement;
};

// Runs `kernel` on a copy of the inputs laid out per `c`; returns the result.
std::vector<std::uint8_t> run_case(ReduceKernel kernel, const Case& c,
                                   const std::vector<std::uint8_t>& a,
                                   const std::vector<std::uint8_t>& b) {
  const std::size_t size = dtype_size(c.dtype);
  const std::size_t bytes = c.length * size;
  const std::size_t pad = (kMaxShift + 1) * size;
  std::vector<std::uint8_t> buf_a(bytes + pad), buf_b(bytes + pad), buf_d(bytes + pad, 0xcd);
  std::uint8_t* pa = buf_a.data() + (c.shift % 4) * size;
  std::uint8_t* pb = buf_b.data() + ((c.shift + 1) % 4) * size;
  std::uint8_t* pd = buf_d.data() + ((c.shift + 2) % 4) * size;
  if (bytes) std::memcpy(pa, a.data(), bytes);
  if (bytes) std::memcpy(pb, b.data(), bytes);
  if (c.placement == Placement::IntoA) pd = pa;
  if (c.placement == Placement::IntoB) pd = pb;
  kernel(pd, pa, pb, c.length, c.dtype, c.op);
  return std::vector<std::uint8_t>(pd, pd + bytes);
}

::testing::AssertionResult same_results(const Case& c, const std::vector<std::uint8_t>& want,
                                        const std::vector<std::uint8_t>& got) {
  const std::size_t size = dtype_size(c.dtype);
  for (std::size_t i = 0; i < c.length; ++i) {
    const std::uint8_t* w = want.data() + i * size;
    const std::uint8_t* g = got.data() + i * size;
    if (std::memcmp(w, g, size) == 0) continue;
    if (is_nan(c.dtype, w) && is_nan(c.dtype, g)) continue;
    return ::testing::AssertionFailure()
           << to_string(c.dtype) << " " << to_string(c.op) << " length " << c.length << " shift "
           << c.shift << " placement " << static_cast<int>(c.placement) << ": element " << i
           << " differs";
  }
  return ::testing::AssertionSuccess();
}

void check_isa_matches_generic(ReduceIsa isa) {
  if (!reduce_isa_supported(isa)) GTEST_SKIP() << to_string(isa) << " not supported here";
  ReduceKernel kernel = reduce_kernel(isa);
  std::mt19937_64 rng(0x5eed0000u + static_cast<unsigned>(isa));
  for (DataType dtype : kDtypes) {
    for (std::size_t length = 0; length <= kMaxLength; ++length) {
      auto a = random_buffer(dtype, length, rng);
      auto b = random_buffer(dtype, length, rng);
      for (ReduceOp op : kOps) {
        Case reference{dtype, op, length, 0, Placement::OutOfPlace};
        auto want = run_case(reduce_into_generic, reference, a, b);
        for (std::size_t shift = 0; shift <= kMaxShift; ++shift) {
          for (Placement placement : {Placement::OutOfPlace, Placement::IntoA, Placement::IntoB}) {
            Case c{dtype, op, length, shift, placement};
            ASSERT_TRUE(same_results(c, want, run_case(kernel, c, a, b)));
          }
        }
      }
    }
  }
}

TEST(ReduceSimd, Avx2MatchesGeneric) { check_isa_matches_generic(ReduceIsa::Avx2); }
TEST(ReduceSimd, Avx512MatchesGeneric) { check_isa_matches_generic(ReduceIsa::Avx512); }

// The rounding edges of the half types, exhaustively over one operand: every
// fp16/bf16 bit pattern summed with values that land on ties, overflow to
// infinity and the subnormal range.
TEST(ReduceSimd, HalfTypesRoundLikeGenericOnEveryBitPattern) {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  const std::uint16_t partners[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x3c00, 0x3c01, 0x7bff,
                                    0xfbff, 0x0400, 0x3f80, 0x7f7f, 0x0080, 0x1400, 0xc000};
  for (ReduceIsa isa : kReduceIsas) {
    if (isa == ReduceIsa::Generic || !reduce_isa_supported(isa)) continue;
    for (DataType dtype : {DataType::Float16, DataType::Bfloat16}) {
      for (std::uint16_t partner : partners) {
        std::vector<std::uint16_t> other(all.size(), partner);
        for (ReduceOp op : kOps) {
          Case c{dtype, op, all.size(), 0, Placement::OutOfPlace};
          std::vector<std::uint8_t> a(all.size() * 2), b(all.size() * 2);
          std::memcpy(a.data(), all.data(), a.size());
          std::memcpy(b.data(), other.data(), b.size());
          auto want = run_case(reduce_into_generic, c, a, b);
          ASSERT_TRUE(same_results(c, want, run_case(reduce_kernel(isa), c, a, b)))
              << to_string(isa) << " partner " << partner;
        }
      }
    }
  }
}

// The n-input half-type kernels (reduce_halves): every ISA, 1 to 8 inputs, every length up to
// 70, out apart or equal to the first or the last input, give the bits of the scalar
// composition: each input widened to fp32, reduced in fp32 in order, rounded once (a NaN's
// payload may differ).
std::uint16_t fold_halves(DataType dtype, ReduceOp op,
                          const std::vector<std::vector<std::uint8_t>>& inputs, std::size_t i) {
  auto widen = [dtype](const std::vector<std::uint8_t>& in, std::size_t j) {
    std::uint16_t h;
    std::memcpy(&h, in.data() + 2 * j, 2);
    return dtype == DataType::Float16 ? half_to_float(h) : bf16_to_float(h);
  };
  float acc = widen(inputs[0], i);
  for (std::size_t k = 1; k < inputs.size(); ++k) {
    acc = op == ReduceOp::Sum ? acc + widen(inputs[k], i) : acc * widen(inputs[k], i);
  }
  return dtype == DataType::Float16 ? float_to_half(acc) : float_to_bf16(acc);
}

TEST(ReduceSimd, HalfTypesOfManyInputsMatchTheScalarComposition) {
  std::mt19937_64 rng(0x4a1f5u);
  for (ReduceIsa isa : kReduceIsas) {
    if (!reduce_isa_supported(isa)) continue;
    const ReduceHalvesKernel kernel = reduce_halves_kernel(isa);
    for (DataType dtype : {DataType::Float16, DataType::Bfloat16}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod}) {
        for (std::size_t n = 1; n <= 8; ++n) {
          for (std::size_t length = 0; length <= 70; ++length) {
            std::vector<std::vector<std::uint8_t>> inputs;
            for (std::size_t k = 0; k < n; ++k) inputs.push_back(random_buffer(dtype, length, rng));
            for (int place = 0; place < 3; ++place) {  // apart, into the first, into the last
              auto copies = inputs;
              std::vector<const void*> pointers;
              for (auto& copy : copies) pointers.push_back(copy.data());
              std::vector<std::uint8_t> apart(length * 2, 0xcd);
              std::uint8_t* out = place == 0   ? apart.data()
                                  : place == 1 ? copies.front().data()
                                               : copies.back().data();
              ASSERT_TRUE(kernel(out, pointers.data(), n, length, dtype, op));
              for (std::size_t i = 0; i < length; ++i) {
                const std::uint16_t want = fold_halves(dtype, op, inputs, i);
                std::uint16_t got;
                std::memcpy(&got, out + 2 * i, 2);
                std::uint8_t w[2], g[2];
                std::memcpy(w, &want, 2);
                std::memcpy(g, &got, 2);
                ASSERT_TRUE(want == got || (is_nan(dtype, w) && is_nan(dtype, g)))
                    << to_string(isa) << " " << to_string(dtype) << " " << to_string(op) << " n "
                    << n << " length " << length << " place " << place << " element " << i;
              }
            }
          }
        }
      }
    }
    EXPECT_FALSE(kernel(nullptr, nullptr, 0, 0, DataType::Float32, ReduceOp::Sum));
    EXPECT_FALSE(kernel(nullptr, nullptr, 0, 0, DataType::Float16, ReduceOp::Max));
  }
}

// The half <-> fp32 conversion kernels against the generic (scalar) one: every fp16/bf16 bit
// pattern widened; narrowed, random fp32 bits and the fp32 values around every half rounding
// edge (each half value plus and minus 0, 1 and half an fp32 step below the half's step: ties,
// overflow to infinity, subnormals), at every length up to 40 and misaligned. A NaN's payload
// may differ, as for the reductions.
TEST(ReduceSimd, HalfConversionsMatchGeneric) {
  std::vector<std::uint16_t> halves(65536);
  for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<std::uint16_t>(i);
  std::vector<std::uint32_t> floats;
  std::mt19937_64 rng(0xc0417u);
  for (int i = 0; i < 20000; ++i) floats.push_back(static_cast<std::uint32_t>(rng()));
  for (std::uint32_t h = 0; h < 65536; h += 1) {
    const std::uint32_t f16 =
        std::bit_cast<std::uint32_t>(half_to_float(static_cast<std::uint16_t>(h)));
    const std::uint32_t bf16 = h << 16;
    for (std::uint32_t base : {f16, bf16}) {
      for (std::uint32_t delta : {0u, 1u, 0xfffu, 0x1000u, 0x1001u, 0x7fffu, 0x8000u, 0x8001u}) {
        floats.push_back(base + delta);
        floats.push_back(base - delta);
      }
    }
  }
  auto same = [](DataType dtype, const void* want, const void* got, std::size_t n) {
    const std::size_t size = dtype_size(dtype);
    for (std::size_t i = 0; i < n; ++i) {
      const auto* w = static_cast<const std::uint8_t*>(want) + i * size;
      const auto* g = static_cast<const std::uint8_t*>(got) + i * size;
      if (std::memcmp(w, g, size) != 0 && !(is_nan(dtype, w) && is_nan(dtype, g))) return i;
    }
    return n;
  };
  for (ReduceIsa isa : kReduceIsas) {
    if (!reduce_isa_supported(isa)) continue;
    const ConvertKernel kernel = convert_half_kernel(isa);
    for (DataType half : {DataType::Float16, DataType::Bfloat16}) {
      std::vector<float> want_wide(halves.size()), got_wide(halves.size() + 4);
      ASSERT_TRUE(convert_half_generic(halves.data(), half, want_wide.data(), DataType::Float32,
                                       halves.size()));
      ASSERT_TRUE(
          kernel(halves.data(), half, got_wide.data() + 1, DataType::Float32, halves.size()));
      ASSERT_EQ(same(DataType::Float32, want_wide.data(), got_wide.data() + 1, halves.size()),
                halves.size())
          << to_string(isa) << " " << to_string(half) << " widening";
      std::vector<std::uint16_t> want_narrow(floats.size()), got_narrow(floats.size() + 4);
      ASSERT_TRUE(convert_half_generic(floats.data(), DataType::Float32, want_narrow.data(), half,
                                       floats.size()));
      ASSERT_TRUE(
          kernel(floats.data(), DataType::Float32, got_narrow.data() + 3, half, floats.size()));
      const std::size_t bad = same(half, want_narrow.data(), got_narrow.data() + 3, floats.size());
      ASSERT_EQ(bad, floats.size()) << to_string(isa) << " " << to_string(half) << " narrowing "
                                    << std::hex << (bad < floats.size() ? floats[bad] : 0u);
      for (std::size_t length = 0; length <= 40; ++length) {  // the tails
        std::vector<std::uint16_t> out(length + 1, 0xabcd);
        ASSERT_TRUE(kernel(floats.data() + 5, DataType::Float32, out.data(), half, length));
        ASSERT_EQ(same(half, want_narrow.data() + 5, out.data(), length), length) << length;
        EXPECT_EQ(out[length], 0xabcd) << "wrote past the end at length " << length;
      }
    }
    std::uint16_t h[4] = {};
    float f[4] = {};
    EXPECT_FALSE(kernel(h, DataType::Float16, h, DataType::Bfloat16, 4)) << to_string(isa);
    EXPECT_FALSE(kernel(f, DataType::Float32, f, DataType::Float32, 4)) << to_string(isa);
  }
}

TEST(ReduceSimd, IsaNamesRoundTripAndGenericIsAlwaysThere) {
  for (ReduceIsa isa : kReduceIsas) {
    ReduceIsa parsed;
    ASSERT_TRUE(parse_reduce_isa(to_string(isa), &parsed));
    EXPECT_EQ(parsed, isa);
  }
  ReduceIsa parsed;
  EXPECT_FALSE(parse_reduce_isa("sse9", &parsed));
  EXPECT_TRUE(reduce_isa_supported(ReduceIsa::Generic));
  EXPECT_TRUE(reduce_isa_supported(active_reduce_isa()));
}

TEST(ReduceSimd, KernelsRejectAvgLikeTheGenericOne) {
  float a[20] = {}, b[20] = {}, d[20];
  for (ReduceIsa isa : kReduceIsas) {
    if (!reduce_isa_supported(isa)) continue;
    EXPECT_THROW(reduce_kernel(isa)(d, a, b, 20, DataType::Float32, ReduceOp::Avg), Error)
        << to_string(isa);
  }
}

}  // namespace
}  // namespace chorus
