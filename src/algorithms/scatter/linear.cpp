// Linear scatter: the root sends every rank its block directly.
//
// Block p of the root's `send` goes to rank p; the root copies its own block
// (nothing in place, where `recv` already is that block). One step, n - 1
// messages leaving the root. Off the root `send` is unused (may be NULL).
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace chorus::algorithms {

void scatter_linear(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  RequestSet requests(transport, args);
  if (transport.rank() != args.root) {
    requests.recv(args.root, args.recv, bytes);
    requests.wait();
    return;
  }
  for (int peer = 0; peer < transport.size(); ++peer) {
    const void* block =
        element_at(args.send, static_cast<std::size_t>(peer) * args.count, args.dtype);
    if (peer == args.root) {
      copy_elements(args.recv, block, args.count, args.dtype);
    } else {
      requests.send(peer, block, bytes);
    }
  }
  requests.wait();
}

}  // namespace chorus::algorithms
