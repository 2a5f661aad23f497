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
  const int n = arena.size();
  const int r = arena.rank();
  const std::uint64_t g = arena.begin_round(args.deadline);
  const std::size_t block = bytes_of(args.count, args.dtype);
  copy_elements(element_at(args.recv, r * args.count, args.dtype), args.send, args.count,
                args.dtype);
  for (int step = 1; step < n; ++step) {
    const int p = (r + step) % n;
    call.read_send(p, 0, element_at(args.recv, p * args.count, args.dtype), block);
  }
  arena.post(2 * g);
  arena.wait_all(2 * g, args.deadline);
}

}  // namespace chorus::algorithms
