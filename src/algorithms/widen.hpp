// Reductions carried out in a wider dtype than the caller's (core/reduce.hpp's
// accumulation_type: fp32 for float16/bfloat16, 64-bit integers for an integer average):
// the inputs are converted into wide copies, the wide collective runs, the result is
// divided once when it is an average and converted back, so each element is rounded once.
// The communicator widens the integer averages, and the half-type calls whose algorithm
// does not accumulate half types itself (Folding::None; among the reducing
// algorithms only hierarchical and striped), comm/run_collective.cpp; the others move half types as
// half types and keep their partial results in fp32 (algorithms/partials.hpp).
#pragma once

#include "algorithms/algorithm.hpp"
#include "algorithms/common.hpp"
#include "core/reduce.hpp"

#include <cstddef>

namespace chorus::algorithms {

/// Runs `args` (a reduction in the caller's dtype, Avg already lowered to Sum: `average` says
/// whether it was one) as `wide` through `run_wide(Call&)`, on a communicator of
/// `size` ranks where this rank is `rank`.
template <typename RunWide>
void run_widened(Call args, int rank, int size, DataType wide, bool average, RunWide&& run_wide) {
  const DataType narrow = args.dtype;
  const std::size_t send_elems = args.collective == Collective::ReduceScatter
                                     ? args.count * static_cast<std::size_t>(size)
                                     : args.count;
  const bool receives = receives_result(args, rank);
  // Scratch: the wide copies come back from the per-thread pool on the next call instead
  // of being allocated, zeroed and faulted in again (it was most of a widened call's time).
  Scratch wide_send(send_elems, wide);
  Scratch wide_recv(receives ? args.count : 0, wide);
  convert(args.send, narrow, wide_send.data(), wide, send_elems);
  void* user_recv = args.recv;
  args.send = wide_send.data();
  args.recv = receives ? wide_recv.data() : nullptr;
  args.dtype = wide;
  args.average = false;  // divided here, once, in the wide dtype
  run_wide(args);
  if (!receives) return;
  if (average) finalize_average(wide_recv.data(), args.count, wide, size);
  convert(wide_recv.data(), wide, user_recv, narrow, args.count);
}

}  // namespace chorus::algorithms
