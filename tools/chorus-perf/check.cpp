// Closed-form data for chorus-perf's checks (see check.hpp).
#include "check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/half.hpp"

namespace chorus::perf {
namespace {

constexpr double kSentinel = 111;

template <typename T>
T load_as(const std::byte* base, std::size_t i) {
  T value;
  std::memcpy(&value, base + i * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
void store_as(std::byte* base, std::size_t i, T value) {
  std::memcpy(base + i * sizeof(T), &value, sizeof(T));
}

double load(const std::byte* base, std::size_t i, DataType dtype) {
  switch (dtype) {
    case DataType::Int8:
      return load_as<std::int8_t>(base, i);
    case DataType::Uint8:
      return load_as<std::uint8_t>(base, i);
    case DataType::Int32:
      return load_as<std::int32_t>(base, i);
    case DataType::Uint32:
      return load_as<std::uint32_t>(base, i);
    case DataType::Int64:
      return static_cast<double>(load_as<std::int64_t>(base, i));
    case DataType::Uint64:
      return static_cast<double>(load_as<std::uint64_t>(base, i));
    case DataType::Float16:
      return half_to_float(load_as<std::uint16_t>(base, i));
    case DataType::Bfloat16:
      return bf16_to_float(load_as<std::uint16_t>(base, i));
    case DataType::Float32:
      return load_as<float>(base, i);
    case DataType::Float64:
      return load_as<double>(base, i);
  }
  return 0;
}

// Integers go through int64 and are narrowed modulo 2^bits (C++20), which is
// how the library's wrapping integer arithmetic ends up too.
void store(std::byte* base, std::size_t i, DataType dtype, double value) {
  auto integer = static_cast<std::int64_t>(value);
  switch (dtype) {
    case DataType::Int8:
      return store_as(base, i, static_cast<std::int8_t>(integer));
    case DataType::Uint8:
      return store_as(base, i, static_cast<std::uint8_t>(integer));
    case DataType::Int32:
      return store_as(base, i, static_cast<std::int32_t>(integer));
    case DataType::Uint32:
      return store_as(base, i, static_cast<std::uint32_t>(integer));
    case DataType::Int64:
      return store_as(base, i, integer);
    case DataType::Uint64:
      return store_as(base, i, static_cast<std::uint64_t>(integer));
    case DataType::Float16:
      return store_as(base, i, float_to_half(static_cast<float>(value)));
    case DataType::Bfloat16:
      return store_as(base, i, float_to_bf16(static_cast<float>(value)));
    case DataType::Float32:
      return store_as(base, i, static_cast<float>(value));
    case DataType::Float64:
      return store_as(base, i, value);
  }
}

double round_to(DataType dtype, double value) {
  std::byte element[8];
  store(element, 0, dtype, value);
  return load(element, 0, dtype);
}

bool is_float(DataType dtype) {
  return dtype == DataType::Float16 || dtype == DataType::Bfloat16 || dtype == DataType::Float32 ||
         dtype == DataType::Float64;
}

bool reduces(Bench bench) {
  return bench == Bench::AllReduce || bench == Bench::Reduce || bench == Bench::ReduceScatter;
}

double tag(int q, std::size_t k) {
  return static_cast<double>((13 * static_cast<std::size_t>(q) + k) % 97);
}

double input_value(const Case& c, int q, std::size_t k) {
  if (!reduces(c.bench)) return tag(q, k);
  std::size_t qk = static_cast<std::size_t>(q) + k;
  switch (c.op) {
    case ReduceOp::Max:
    case ReduceOp::Min:
      return static_cast<double>((5 * static_cast<std::size_t>(q) + k) % 11);
    case ReduceOp::Prod:
      return qk % 3 == 0 ? 2 : 1;
    default:
      return static_cast<double>(qk % 4);  // sum, avg
  }
}

// The reduction over ranks of element k. Inputs and partial results are
// integers far below 2^53, so double arithmetic is exact; the result is then
// rounded to the dtype once, as DESIGN.md's avg rule says.
double reduced_value(const Case& c, std::size_t k) {
  double acc = input_value(c, 0, k);
  for (int q = 1; q < c.nranks; ++q) {
    double v = input_value(c, q, k);
    switch (c.op) {
      case ReduceOp::Prod:
        acc *= v;
        break;
      case ReduceOp::Max:
        acc = std::max(acc, v);
        break;
      case ReduceOp::Min:
        acc = std::min(acc, v);
        break;
      default:
        acc += v;
        break;
    }
  }
  if (c.op == ReduceOp::Avg) {
    if (c.dtype == DataType::Float64)
      acc /= c.nranks;
    else if (is_float(c.dtype))
      acc = static_cast<float>(acc) / static_cast<float>(c.nranks);
    else
      acc = static_cast<double>(static_cast<std::int64_t>(acc) / c.nranks);
  }
  return round_to(c.dtype, acc);
}

// Expected value at element k of rank r's output region.
double expected(const Case& c, std::size_t k) {
  const int r = c.rank;
  const std::size_t block = std::max<std::size_t>(c.block, 1);
  const int from = static_cast<int>(k / block);
  const std::size_t j = k % block;
  switch (c.bench) {
    case Bench::AllReduce:
    case Bench::Reduce:
      return reduced_value(c, k);
    case Bench::ReduceScatter:
      return reduced_value(c, r * c.block + k);
    case Bench::Broadcast:
      return tag(c.root, k);
    case Bench::AllGather:
    case Bench::Gather:
      return tag(from, j);
    case Bench::Scatter:
      return tag(c.root, r * c.block + k);
    case Bench::AllToAll:
      return tag(from, r * c.block + j);
    case Bench::AllToAllV:
      return j < alltoallv_count(c, from, r) ? tag(from, r * c.block + j) : kSentinel;
    case Bench::SendRecv:
      return tag((r + c.nranks - 1) % c.nranks, k);
    case Bench::Barrier:
      break;
  }
  return kSentinel;
}

bool matches(DataType dtype, double got, double want) {
  if (got == want) return true;
  if (!is_float(dtype)) return false;
  double tolerance = dtype == DataType::Float16    ? 2e-3
                     : dtype == DataType::Bfloat16 ? 1.6e-2
                     : dtype == DataType::Float32  ? 1e-6
                                                   : 1e-12;
  return std::fabs(got - want) <= tolerance * std::max(1.0, std::fabs(want));
}

bool has_output(const Case& c) {
  if (c.bench == Bench::Barrier) return false;
  if (c.bench == Bench::Reduce || c.bench == Bench::Gather) return c.rank == c.root;
  return true;
}

void fill_sentinel(Storage& storage, DataType dtype) {
  std::size_t elements = storage.size() / dtype_size(dtype);
  for (std::size_t i = 0; i < elements; ++i) store(storage.data(), i, dtype, kSentinel);
}

}  // namespace

void fill_buffers(const Case& c, Buffers& buffers) {
  fill_sentinel(buffers.first, c.dtype);
  fill_sentinel(buffers.second, c.dtype);
  for (std::size_t k = 0; k < buffers.send_elems; ++k) {
    store(buffers.send, k, c.dtype, input_value(c, c.rank, k));
  }
}

std::size_t count_wrong(const Case& c, const Buffers& buffers) {
  if (!has_output(c)) return 0;
  std::size_t wrong = 0;
  for (std::size_t k = 0; k < buffers.recv_elems; ++k) {
    if (!matches(c.dtype, load(buffers.recv, k, c.dtype), expected(c, k))) ++wrong;
  }
  return wrong;
}

}  // namespace chorus::perf
