// Linear gather: every rank sends its block straight to the root.
//
// The root posts one receive per peer into that peer's slot of `recv` and
// copies its own block (nothing in place, where it already sits there). One
// step, n - 1 messages converging on the root: best when n is small or the
// blocks are large. Off the root `recv` is unused (may be NULL).
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  RequestSet requests(args, ctx);
  if (ctx.rank() != args.root) {
    requests.send(args.root, args.send, bytes);
    requests.wait();
    return;
  }
  for (int peer = 0; peer < ctx.size(); ++peer) {
    void* slot = element_at(args.recv, static_cast<std::size_t>(peer) * args.count, args.dtype);
    if (peer == args.root) {
      copy_elements(slot, args.send, args.count, args.dtype);
    } else {
      requests.recv(peer, slot, bytes);
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

const Algorithm rows::gather_linear{.name = "linear",
                                    .description = "every rank sends its block to the root",
                                    .collective = Collective::Gather,
                                    .cost = cost,
                                    .run = runs<run>};

}  // namespace chorus::algorithms
