// All-gather directly in the host arena, one flag per round: rank r copies a
// chunk of its block into its round buffer and posts 2g; every rank copies each
// other rank's chunk out as soon as that rank's flag says it is there, in the order
// the ranks get there (HostArena::for_each_ready). In place
// (send = block r of recv) the own copy is skipped.
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "core/copy.hpp"
#include "transport/shm/host_arena.hpp"

#include <algorithm>
#include <cstring>

namespace chorus::algorithms {
namespace {

using transport::shm::HostArena;

void allgather_round(HostArena& arena, const CollectiveArgs& args, std::size_t offset,
                     std::size_t c) {
  const int r = arena.rank();
  const std::size_t bytes = bytes_of(c, args.dtype);
  const std::uint64_t g = arena.begin_round(args.deadline, bytes);
  const std::byte* source = element_at(args.send, offset, args.dtype);
  copy_bytes(arena.buffer(r, g), source, bytes);
  arena.post(2 * g);
  copy_elements(element_at(args.recv, r * args.count + offset, args.dtype), source, c, args.dtype);
  arena.for_each_ready(2 * g, args.deadline, [&](int j) {
    copy_bytes(element_at(args.recv, j * args.count + offset, args.dtype), arena.buffer(j, g),
               bytes);
  });
}

}  // namespace

void allgather_shm_direct(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  HostArena& arena = begin_arena_call(transport, args);
  const std::size_t chunk = arena.round_bytes() / dtype_size(args.dtype);
  for (std::size_t offset = 0; offset < args.count; offset += chunk) {
    allgather_round(arena, args, offset, std::min(chunk, args.count - offset));
  }
}

}  // namespace chorus::algorithms
