// Bruck all-to-all: ceil(log2 n) rounds for any rank count.
//
// Rank r first rotates its input so that slot i holds the block for rank
// r + i. In round k (s = 2^k) it packs every slot whose index has bit k set,
// sends the pack to r + s, receives the matching pack from r - s and unpacks
// it into the same slots. A block in slot i moves by exactly i in total, so it
// ends at its destination, and there slot i holds the block from rank r - i
// (patterns/bruck.hpp); a last reordering puts it at that rank's place.
//
// Rounds: ceil(log2 n) latencies instead of pairwise's n - 1, but each block
// travels up to log2 n times (about n/2 blocks per round): the choice for
// small blocks only. The work buffer is a snapshot, so in place is free.
#include "algorithms/patterns/bruck.hpp"

#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const int n = ctx.size();
  const int rank = ctx.rank();
  const std::size_t count = args.count;
  const std::size_t block_bytes = bytes_of(count, args.dtype);
  Scratch work(static_cast<std::size_t>(n) * count, args.dtype);
  rotate_blocks(work.data(), args.send, rank, n, count, args.dtype);
  auto slot = [&](int index) { return work.at(static_cast<std::size_t>(index) * count); };
  const std::size_t most = static_cast<std::size_t>(n) * count;
  Scratch outgoing(most, args.dtype), incoming(most, args.dtype);
  RequestSet requests(args, ctx);
  for (int round = 0; round < patterns::bruck_rounds(n); ++round) {
    auto slots = patterns::bruck_alltoall_slots(n, round);
    for (std::size_t j = 0; j < slots.size(); ++j) {
      copy_elements(outgoing.at(j * count), slot(slots[j]), count, args.dtype);
    }
    auto peers = patterns::bruck_alltoall_partners(rank, n, round);
    std::size_t bytes = slots.size() * block_bytes;
    requests.exchange(peers.send_to, outgoing.data(), bytes, peers.recv_from, incoming.data(),
                      bytes);
    for (std::size_t j = 0; j < slots.size(); ++j) {
      copy_elements(slot(slots[j]), incoming.at(j * count), count, args.dtype);
    }
  }
  for (int i = 0; i < n; ++i) {
    copy_elements(
        element_at(args.recv, static_cast<std::size_t>(patterns::wrap(rank - i, n)) * count,
                   args.dtype),
        slot(i), count, args.dtype);
  }
}

double cost(const CostInput& in) {
  const Shape s = in.shape();
  const double m = in.m();
  return spread_cost(in, {s.lg, s.lg * s.n / 2 * m, (s.lg * s.n + 2 * s.n) * m});
}

}  // namespace

const Algorithm rows::alltoall_bruck{
    .name = "bruck",
    .description = "ceil(log2 n) rounds of packed blocks; for small blocks",
    .collective = Collective::AllToAll,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
