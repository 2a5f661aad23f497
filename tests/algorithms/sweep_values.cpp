// Inputs and references of the sweep, computed in double without any Chorus code.
#include "sweep_values.hpp"

#include "typed_values.hpp"

#include <algorithm>
#include <cstdint>

namespace chorus::testing {
namespace {

// Data moved without arithmetic: spread values that the dtype stores exactly.
std::uint64_t exact_modulus(DataType dtype) {
  switch (dtype) {
    case DataType::Int8:
      return 127;
    case DataType::Uint8:
    case DataType::Bfloat16:
      return 251;
    case DataType::Float16:
      return 2039;
    default:
      return 1000003;
  }
}

double combine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::Prod:
      return a * b;
    case ReduceOp::Max:
      return std::max(a, b);
    case ReduceOp::Min:
      return std::min(a, b);
    default:
      return a + b;
  }
}

// Element `index` of the send buffers reduced over all ranks.
double reduced(const SweepCase& c, std::size_t index) {
  double result = sweep_input(c, 0, index);
  for (int rank = 1; rank < c.nranks; ++rank) {
    result = combine(c.op, result, sweep_input(c, rank, index));
  }
  return result;
}

std::size_t rank_index(int rank) { return static_cast<std::size_t>(rank); }

// Unused elements between all-to-all-v blocks; none when the counts are all
// 0, so that those buffers may be NULL.
std::size_t gap(const SweepCase& c, int elements) {
  return c.count == 0 ? 0 : static_cast<std::size_t>(elements);
}

// Receive elements [first, first + count) must hold value_of(0 .. count - 1).
template <typename ValueOf>
void expect_range(std::vector<Expectation>& out, std::size_t first, std::size_t count,
                  ValueOf value_of) {
  for (std::size_t i = 0; i < count; ++i) out.push_back({first + i, value_of(i)});
}

void expect_alltoallv(std::vector<Expectation>& out, const SweepCase& c, int rank) {
  for (int p = 0; p < c.nranks; ++p) {
    std::size_t from = alltoallv_send_displ(c, p, rank);
    expect_range(out, alltoallv_recv_displ(c, rank, p), alltoallv_count(c, p, rank),
                 [&](std::size_t i) { return sweep_input(c, p, from + i); });
  }
}

}  // namespace

double sweep_input(const SweepCase& c, int rank, std::size_t index) {
  const std::uint64_t r = rank_index(rank), j = index, s = c.seq;
  if (!is_reducing(c.algorithm->collective)) {
    return static_cast<double>((r * 131 + j * 7 + s * 13) % exact_modulus(c.dtype));
  }
  const bool negatives = is_signed(c.dtype);
  if (c.op == ReduceOp::Prod) {
    // At most two ranks of eight hit (r + j + s) % 4 == 0: products stay within ±4.
    double magnitude = (r + j + s) % 4 == 0 ? 2 : 1;
    return negatives && (r * 3 + j + s) % 5 == 0 ? -magnitude : magnitude;
  }
  double v = static_cast<double>((r * 7 + j * 3 + s) % 9);
  return negatives ? v - 4 : v;  // sums of 8 stay within [-32, 64]
}

std::size_t sweep_send_elements(const SweepCase& c, int rank) {
  const std::size_t n = rank_index(c.nranks);
  switch (c.algorithm->collective) {
    case Collective::Broadcast:
      return rank == c.root ? c.count : 0;
    case Collective::Scatter:
      return rank == c.root ? n * c.count : 0;
    case Collective::ReduceScatter:
    case Collective::AllToAll:
      return n * c.count;
    case Collective::AllToAllV:
      return alltoallv_send_displ(c, rank, -1);
    case Collective::Barrier:
      return 0;
    default:
      return c.count;
  }
}

std::size_t sweep_recv_elements(const SweepCase& c, int rank) {
  const std::size_t n = rank_index(c.nranks);
  switch (c.algorithm->collective) {
    case Collective::Reduce:
      return rank == c.root ? c.count : 0;
    case Collective::Gather:
      return rank == c.root ? n * c.count : 0;
    case Collective::AllGather:
    case Collective::AllToAll:
      return n * c.count;
    case Collective::AllToAllV:
      return alltoallv_recv_displ(c, rank, c.nranks);
    case Collective::Barrier:
      return 0;
    default:
      return c.count;
  }
}

std::size_t alltoallv_count(const SweepCase& c, int from, int to) {
  std::uint64_t k = (rank_index(from) * 3 + rank_index(to) * 5 + c.seq) % 4;  // 0..3
  return k * c.count / 3;  // 0, count/3, 2count/3, count
}

std::size_t alltoallv_send_displ(const SweepCase& c, int from, int to) {
  std::size_t displ = 0;
  for (int peer = c.nranks - 1; peer > to; --peer) {
    displ += alltoallv_count(c, from, peer) + gap(c, peer % 2);
  }
  return displ;
}

std::size_t alltoallv_recv_displ(const SweepCase& c, int to, int from) {
  std::size_t displ = 0;
  for (int peer = 0; peer < from; ++peer)
    displ += alltoallv_count(c, peer, to) + gap(c, 1 - peer % 2);
  return displ;
}

std::vector<Expectation> sweep_expectations(const SweepCase& c, int rank) {
  std::vector<Expectation> out;
  const std::size_t count = c.count, mine = rank_index(rank) * count;
  const std::size_t n = rank_index(c.nranks);
  switch (c.algorithm->collective) {
    case Collective::Reduce:
      if (rank != c.root) break;
      [[fallthrough]];
    case Collective::AllReduce:
      expect_range(out, 0, count, [&](auto i) { return reduced(c, i); });
      break;
    case Collective::Broadcast:
      expect_range(out, 0, count, [&](auto i) { return sweep_input(c, c.root, i); });
      break;
    case Collective::ReduceScatter:
      expect_range(out, 0, count, [&](auto i) { return reduced(c, mine + i); });
      break;
    case Collective::Scatter:
      expect_range(out, 0, count, [&](auto i) { return sweep_input(c, c.root, mine + i); });
      break;
    case Collective::Gather:
      if (rank != c.root) break;
      [[fallthrough]];
    case Collective::AllGather:
      for (std::size_t p = 0; p < n; ++p) {
        expect_range(out, p * count, count, [&](auto i) { return sweep_input(c, int(p), i); });
      }
      break;
    case Collective::AllToAll:
      for (std::size_t p = 0; p < n; ++p) {
        expect_range(out, p * count, count,
                     [&](auto i) { return sweep_input(c, int(p), mine + i); });
      }
      break;
    case Collective::AllToAllV:
      expect_alltoallv(out, c, rank);
      break;
    default:
      break;
  }
  return out;
}

}  // namespace chorus::testing
