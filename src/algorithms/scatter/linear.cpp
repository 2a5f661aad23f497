// Linear scatter: the root sends every rank its block directly.
//
// Block p of the root's `send` goes to rank p; the root copies its own block
// (nothing in place, where `recv` already is that block). One step, n - 1
// messages leaving the root. Off the root `send` is unused (may be NULL).
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  RequestSet requests(args, ctx);
  if (ctx.rank() != args.root) {
    requests.recv(args.root, args.recv, bytes);
    requests.wait();
    return;
  }
  for (int peer = 0; peer < ctx.size(); ++peer) {
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

double cost(const CostInput& in) {
  const Shape s = in.shape();
  const double m = in.m();
  return message_cost(in, {s.n - 1, (s.n - 1) * m, m});
}

}  // namespace

const Algorithm rows::scatter_linear{.name = "linear",
                                     .description = "the root sends every rank its block",
                                     .collective = Collective::Scatter,
                                     .cost = cost,
                                     .run = runs<run>};

}  // namespace chorus::algorithms
