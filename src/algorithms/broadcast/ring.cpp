// Pipelined chain broadcast from any root.
//
// The ranks form the chain root -> root+1 -> ... (patterns::chain_links) and
// the buffer is cut into chunks (ctx.chunk_bytes, which selection sets from
// the cost model, else patterns::pipeline_chunk_elements). Each rank
// receives chunk c from its predecessor and forwards it to its successor while
// chunk c+1 is already on its way, so all links carry data at once: with k
// chunks the last rank has everything after n - 1 + k - 1 chunk-steps, close
// to one buffer's time for large buffers (k >> n). The choice for large
// broadcasts; the binomial tree wins for small ones.
//
// Off the root `send` is unused (may be NULL); out of place the root also
// fills its own `recv`.
#include "algorithms/patterns/ring.hpp"

#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/blocks.hpp"

#include <algorithm>
#include <cmath>

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const auto links = patterns::chain_links(ctx.rank(), args.root, ctx.size());
  const std::size_t element = dtype_size(args.dtype);
  const std::size_t chunk = ctx.chunk_bytes >= element
                                ? ctx.chunk_bytes / element
                                : patterns::pipeline_chunk_elements(args.count, element);
  const std::size_t chunks = (args.count + chunk - 1) / chunk;
  auto chunk_at = [&](std::size_t c) { return element_at(args.recv, c * chunk, args.dtype); };
  auto chunk_bytes = [&](std::size_t c) {
    return bytes_of(std::min(chunk, args.count - c * chunk), args.dtype);
  };
  if (links.prev < 0) copy_elements(args.recv, args.send, args.count, args.dtype);
  RequestSet requests(args, ctx);
  // One receive is posted ahead of the one awaited, so a chunk that arrives
  // early lands in place.
  transport::RequestId pending = 0;
  if (links.prev >= 0) pending = requests.recv(links.prev, chunk_at(0), chunk_bytes(0));
  for (std::size_t c = 0; c < chunks; ++c) {
    if (links.prev >= 0) {
      transport::RequestId current = pending;
      if (c + 1 < chunks) pending = requests.recv(links.prev, chunk_at(c + 1), chunk_bytes(c + 1));
      requests.wait_for(current);
    }
    if (links.next >= 0) requests.send(links.next, chunk_at(c), chunk_bytes(c));
  }
  requests.wait();
}

/// The chunk that minimises the modelled time, c = sqrt(bytes * alpha / ((n - 2) * beta))
/// clamped to [4 KiB, 4 MiB].
std::size_t chunk(const CostInput& in) {
  const LinkCost& link = message_link(in);
  const double hops = std::max(in.machine.nranks - 2, 1);
  const double best = std::sqrt(in.m() * link.alpha / (hops * link.beta));
  return static_cast<std::size_t>(std::clamp(best, 4096.0, 4.0 * 1024 * 1024));
}

double cost(const CostInput& in) {
  // k chunks of c bytes: n - 2 + k chunk steps (the last rank has all after them).
  const double m = in.m();
  const double c = in.chunk_bytes ? static_cast<double>(in.chunk_bytes) : std::max(m / 8, 1024.0);
  const double steps = std::max(in.shape().n - 2, 0.0) + std::ceil(std::max(m, 1.0) / c);
  return message_link(in).time(steps, steps * std::min(c, m));
}

}  // namespace

const Algorithm rows::broadcast_ring{.name = "ring",
                                     .description = "pipelined chain from the root, in chunks",
                                     .collective = Collective::Broadcast,
                                     .cost = cost,
                                     .run = runs<run>,
                                     .chunk = chunk};

}  // namespace chorus::algorithms
