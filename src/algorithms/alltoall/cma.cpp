// All-to-all by single-copy reads of the peers' send buffers (algorithms/cma.hpp).
//
// After the cards (round g0), in round g = g0 + 1 rank r copies its own block r
// from send to recv, then reads block r of every peer p's send buffer straight
// into block p of its receive buffer, starting with p = r + 1 so that no rank is
// read by everyone at once; it posts 2g and waits until every rank has, because
// peers read its send buffer until then. Each byte is copied once (by the kernel)
// instead of twice through the arena, and a rank needs nobody between the cards
// and the last flag: when ranks share cores, whichever runs does all its reads
// without waiting for a peer to be scheduled round after round.
//
// The cost model keeps shm_direct wherever the kernel's copy is slow (the
// development machine, a PVM guest: there cma and shm_direct's streamed copies
// ran within 10% of each other from 1 MiB per rank at 4 and 8 ranks, shm_direct
// ahead at 4); CHORUS_ALGO=alltoall=cma selects it.
//
// In place (send == recv): peers read block p of this rank's input while this
// rank overwrites its blocks with what it reads, so the input is first copied to
// a scratch buffer whose address goes on the card instead.
#include "algorithms/cma.hpp"
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "transport/arena/host_arena.hpp"

namespace chorus::algorithms {

namespace {

const Algorithm* run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return nullptr;
  const int n = ctx.size();
  const std::size_t block = bytes_of(args.count, args.dtype);
  Call call_args = args;
  Scratch snapshot;
  if (args.send == args.recv) {
    snapshot = Scratch(args.count * static_cast<std::size_t>(n), args.dtype);
    copy_elements(snapshot.data(), args.send, args.count * static_cast<std::size_t>(n), args.dtype);
    call_args.send = snapshot.data();
  }
  CmaCall call(call_args, ctx);
  if (!call.usable()) return hand_over(rows::alltoall_shm_direct, args, ctx);
  auto& arena = call.arena();
  const int r = arena.rank();
  const std::uint64_t g = arena.begin_round(ctx.deadline);
  copy_elements(element_at(args.recv, r * args.count, args.dtype),
                element_at(call_args.send, r * args.count, args.dtype), args.count, args.dtype);
  for (int step = 1; step < n; ++step) {
    const int p = (r + step) % n;
    call.read_send(p, block * static_cast<std::size_t>(r),
                   element_at(args.recv, p * args.count, args.dtype), block);
  }
  arena.post(2 * g);
  arena.wait_all(2 * g, ctx.deadline);
  return nullptr;
}

double cost(const CostInput& in) {
  return cross_memory_cost(in, 2, (in.shape().n - 1) * in.m(), in.m());
}

}  // namespace

const Algorithm rows::alltoall_cma{
    .name = "cma",
    .description = "one host: every rank reads its block of each peer's input directly",
    .collective = Collective::AllToAll,
    .needs = kNeedsArena | kNeedsCrossMemory,
    .cost = cost,
    .run = run};

}  // namespace chorus::algorithms
