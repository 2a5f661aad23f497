// Scatter by single-copy reads of the root's buffer (algorithms/cma.hpp).
//
// After the cards (round g0), in round g = g0 + 1 every other rank r reads block r
// straight from the root's send buffer into its receive buffer and posts 2g; the root
// copies its own block (nothing in place), posts 2g and waits until every rank has,
// because they read its buffer until then. The others leave as soon as they have read:
// nobody reads their buffers. The copies run on the receiving ranks at once, instead of
// the root copying every block into the arena first.
#include "algorithms/cma.hpp"
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "transport/shm/host_arena.hpp"

namespace chorus::algorithms {

void scatter_cma(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  CmaCall call(transport, args);
  if (!call.usable()) return run_shm_direct_instead(transport, args, scatter_shm_direct);
  auto& arena = call.arena();
  const int r = arena.rank();
  const std::uint64_t g = arena.begin_round(args.deadline);
  const std::size_t block = bytes_of(args.count, args.dtype);
  if (r == args.root) {
    copy_elements(args.recv, element_at(args.send, r * args.count, args.dtype), args.count,
                  args.dtype);
    arena.post(2 * g);
    arena.wait_all(2 * g, args.deadline);
  } else {
    call.read_send(args.root, block * static_cast<std::size_t>(r), args.recv, block);
    arena.post(2 * g);
  }
}

}  // namespace chorus::algorithms
