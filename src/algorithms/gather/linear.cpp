// Linear gather: every rank sends its block straight to the root.
//
// The root posts one receive per peer into that peer's slot of `recv` and
// copies its own block (nothing in place, where it already sits there). One
// step, n - 1 messages converging on the root: best when n is small or the
// blocks are large. Off the root `recv` is unused (may be NULL).
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace chorus::algorithms {

void gather_linear(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  RequestSet requests(transport, args);
  if (transport.rank() != args.root) {
    requests.send(args.root, args.send, bytes);
    requests.wait();
    return;
  }
  for (int peer = 0; peer < transport.size(); ++peer) {
    void* slot = element_at(args.recv, static_cast<std::size_t>(peer) * args.count, args.dtype);
    if (peer == args.root) {
      copy_elements(slot, args.send, args.count, args.dtype);
    } else {
      requests.recv(peer, slot, bytes);
    }
  }
  requests.wait();
}

}  // namespace chorus::algorithms
