// Gather by single-copy reads of the peers' buffers (algorithms/cma.hpp).
//
// After the cards (round g0), in round g = g0 + 1 the root copies its own block into
// block root of its receive buffer (nothing in place) and reads every peer p's send
// buffer straight into block p, then posts 2g. The others post 2g and wait for the
// root's flag, because it reads their buffers until then. No rank copies into the
// arena: each block is copied once, by the root.
#include "algorithms/cma.hpp"
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "transport/shm/host_arena.hpp"

namespace chorus::algorithms {

void gather_cma(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  CmaCall call(transport, args);
  if (!call.usable()) return run_shm_direct_instead(transport, args, gather_shm_direct);
  auto& arena = call.arena();
  const std::uint64_t g = arena.begin_round(args.deadline);
  if (arena.rank() != args.root) {
    arena.post(2 * g);
    arena.wait_for(args.root, 2 * g, args.deadline);
    return;
  }
  read_every_block(call, args);
  arena.post(2 * g);
}

}  // namespace chorus::algorithms
