// The fingerprint of a float32 call, for tests of the sentences that describe calls.
#pragma once

#include "core/collective.hpp"

#include <cstdint>

namespace chorus::testing {

/// Collective `c` number `seq` of `count` float32 elements (sum; root 0 where it has one).
inline Fingerprint float_call(Collective c, std::uint64_t seq, std::uint64_t count = 4) {
  Fingerprint fp;
  fp.collective = c;
  fp.seq = seq;
  fp.count = count;
  fp.dtype = static_cast<std::uint8_t>(DataType::Float32);
  fp.root = has_root(c) ? 0 : -1;
  return fp;
}

}  // namespace chorus::testing
