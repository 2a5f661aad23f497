// All-to-all directly in the host arena: per round rank r copies piece j (c
// elements at `offset` of its block for rank j) into slot j of its round
// buffer and posts 2g; it then copies piece r out of each rank's buffer as soon
// as that rank's flag says it is there. In place is safe: this round's input
// pieces are all in the arena before any output piece is written.
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "core/copy.hpp"
#include "transport/shm/host_arena.hpp"

#include <algorithm>
#include <cstring>

namespace chorus::algorithms {

void alltoall_shm_direct(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  auto& arena = begin_arena_call(transport, args);
  const int n = arena.size();
  const int r = arena.rank();
  const std::size_t chunk = arena.round_bytes() / (dtype_size(args.dtype) * n);
  for (std::size_t offset = 0; offset < args.count; offset += chunk) {
    const std::size_t c = std::min(chunk, args.count - offset);
    const std::size_t piece = bytes_of(c, args.dtype);
    const std::uint64_t g = arena.begin_round(args.deadline, piece * n);
    for (int j = 0; j < n; ++j) {
      copy_bytes(arena.buffer(r, g) + piece * j,
                  element_at(args.send, j * args.count + offset, args.dtype), piece);
    }
    arena.post(2 * g);
    const auto take = [&](int j) {
      copy_bytes(element_at(args.recv, j * args.count + offset, args.dtype),
                  arena.buffer(j, g) + piece * r, piece);
    };
    take(r);
    arena.for_each_ready(2 * g, args.deadline, take);
  }
}

}  // namespace chorus::algorithms
