// Inputs and references of the sweep, as pure functions of the case (see sweep.hpp).
#pragma once

#include "sweep.hpp"

#include <cstddef>
#include <vector>

namespace chorus::testing {

/// Element `index` of rank `rank`'s send buffer.
double sweep_input(const SweepCase& c, int rank, std::size_t index);

/// Elements in the send and receive buffers of `rank` (0 where unused).
std::size_t sweep_send_elements(const SweepCase& c, int rank);
std::size_t sweep_recv_elements(const SweepCase& c, int rank);

/// All-to-all-v layout: elements `from` sends `to`, and where they sit in the
/// sender's buffer (blocks in falling rank order: `to` = -1 gives the extent) and in the
/// receiver's (in rank order: `from` = n gives the extent); gaps lie between the blocks.
std::size_t alltoallv_count(const SweepCase& c, int from, int to);
std::size_t alltoallv_send_displ(const SweepCase& c, int from, int to);
std::size_t alltoallv_recv_displ(const SweepCase& c, int to, int from);

struct Expectation {
  std::size_t index;  ///< element of the receive buffer
  double value;
};

/// What `rank`'s receive buffer must hold after the call.
std::vector<Expectation> sweep_expectations(const SweepCase& c, int rank);

}  // namespace chorus::testing
