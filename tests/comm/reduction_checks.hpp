// GoogleTest checks shared by the communicator tests of reductions (reference.hpp holds the
// values; this adds the comparison and the case label every failure message starts with).
#pragma once

#include "reference.hpp"

#include <gtest/gtest.h>

#include <string>

namespace chorus::testing {

/// "allreduce float32 sum count 7 in place": names one case in failure messages.
inline std::string case_label(const std::string& what, DataType t, ReduceOp op, std::size_t count,
                              bool in_place) {
  return what + " " + std::string(to_string(t)) + " " + std::string(to_string(op)) + " count " +
         std::to_string(count) + (in_place ? " in place" : "");
}

/// The first `got[i]` that differs from the reduction of input element first+i over n ranks,
/// as ": element i is x, expected y"; "" when all match.
inline std::string first_reduction_mismatch(const unsigned char* got, std::size_t count,
                                            std::size_t first, int n, DataType t, ReduceOp op) {
  for (std::size_t i = 0; i < count; ++i) {
    const double want = expected_reduction(n, first + i, t, op);
    const double have = decode(t, got + i * dtype_size(t));
    if (have != want) {
      return ": element " + std::to_string(i) + " is " + std::to_string(have) + ", expected " +
             std::to_string(want);
    }
  }
  return "";
}

/// Checks `got[i]` against the reduction of input element first+i over n ranks, stopping at
/// the first difference.
inline void expect_reduced(const unsigned char* got, std::size_t count, std::size_t first, int n,
                           DataType t, ReduceOp op, const std::string& what) {
  const std::string mismatch = first_reduction_mismatch(got, count, first, n, t, op);
  if (!mismatch.empty()) ADD_FAILURE() << what << mismatch;
}

}  // namespace chorus::testing
