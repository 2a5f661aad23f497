// Gather directly in the host arena: per round every rank copies a chunk of
// its block into its round buffer and posts 2g; the root copies each rank's
// chunk into place as soon as that rank's flag says it is there, in the order the
// ranks get there (its own block
// straight from send, nothing in place).
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "core/copy.hpp"
#include "transport/shm/host_arena.hpp"

#include <algorithm>
#include <cstring>

namespace chorus::algorithms {

void gather_shm_direct(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  auto& arena = begin_arena_call(transport, args);
  const int r = arena.rank();
  const std::size_t chunk = arena.round_bytes() / dtype_size(args.dtype);
  for (std::size_t offset = 0; offset < args.count; offset += chunk) {
    const std::size_t c = std::min(chunk, args.count - offset);
    const std::uint64_t g = arena.begin_round(args.deadline, bytes_of(c, args.dtype));
    const std::byte* source = element_at(args.send, offset, args.dtype);
    if (r != args.root) copy_bytes(arena.buffer(r, g), source, bytes_of(c, args.dtype));
    arena.post(2 * g);
    if (r != args.root) continue;
    copy_elements(element_at(args.recv, r * args.count + offset, args.dtype), source, c,
                  args.dtype);
    arena.for_each_ready(2 * g, args.deadline, [&](int j) {
      copy_bytes(element_at(args.recv, j * args.count + offset, args.dtype), arena.buffer(j, g),
                 bytes_of(c, args.dtype));
    });
  }
}

}  // namespace chorus::algorithms
