// Barrier in the host arena: one round without data. Every rank posts the
// round's flag and waits until every other rank has posted it, so no rank
// leaves before all have arrived. Also home of the helpers every shm_direct
// algorithm shares.
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "core/copy.hpp"
#include "transport/shm/host_arena.hpp"

namespace chorus::algorithms {

bool accepts_host_arena(const CollectiveArgs& args, int /*nranks*/) { return args.host_arena; }

transport::shm::HostArena& begin_arena_call(transport::Transport& transport,
                                            const CollectiveArgs& args) {
  transport::shm::HostArena* arena = transport.host_arena();
  if (!arena) throw Error(Status::InternalError, "shm_direct ran without a host arena");
  // Calls that did not come through a communicator (tests, nested calls) carry no start.
  const auto started = args.started == Clock::time_point{} ? Clock::now() : args.started;
  arena->begin_call(args.fingerprint, started);
  return *arena;
}

void barrier_shm_direct(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  auto& arena = begin_arena_call(transport, args);
  const std::uint64_t g = arena.begin_round(args.deadline, 0);
  arena.post(2 * g);
  arena.wait_all(2 * g, args.deadline);
}

}  // namespace chorus::algorithms
