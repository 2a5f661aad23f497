// Broadcast by single-copy reads of the root's buffer (algorithms/cma.hpp).
//
// After the cards (round g0), in round g = g0 + 1 every other rank reads the
// whole message straight from the root's send buffer into its own receive
// buffer and posts 2g; the root fills its own receive buffer (out of place),
// posts 2g and waits until every rank has, because they read its buffer until
// then. The others leave as soon as they have read: nobody reads their buffers.
#include "algorithms/cma.hpp"
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "transport/shm/host_arena.hpp"

namespace chorus::algorithms {

void broadcast_cma(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  CmaCall call(transport, args);
  if (!call.usable()) return run_shm_direct_instead(transport, args, broadcast_shm_direct);
  auto& arena = call.arena();
  const std::uint64_t g = arena.begin_round(args.deadline);
  if (arena.rank() == args.root) {
    copy_elements(args.recv, args.send, args.count, args.dtype);
    arena.post(2 * g);
    arena.wait_all(2 * g, args.deadline);
  } else {
    call.read_send(args.root, 0, args.recv, bytes_of(args.count, args.dtype));
    arena.post(2 * g);
  }
}

}  // namespace chorus::algorithms
