// All-gather by single-copy reads of the peers' send buffers (algorithms/cma.hpp).
//
// After the cards (round g0), in round g = g0 + 1 rank r copies its own block
// into block r of its receive buffer (nothing in place), reads every peer p's
// send buffer straight into block p, posts 2g and waits until every rank has,
// because peers read its send buffer until then. No rank writes a buffer that a
// peer reads: in place, rank r's send buffer is block r of its receive buffer,
// which only its own (skipped) copy would write.
#include "algorithms/cma.hpp"
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "transport/shm/host_arena.hpp"

namespace chorus::algorithms {

void allgather_cma(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  CmaCall call(transport, args);
  if (!call.usable()) return run_shm_direct_instead(transport, args, allgather_shm_direct);
  auto& arena = call.arena();
  const std::uint64_t g = arena.begin_round(args.deadline);
  read_every_block(call, args);
  arena.post(2 * g);
  arena.wait_all(2 * g, args.deadline);
}

}  // namespace chorus::algorithms
