// All-gather on buffers inside shared windows (algorithms/window.hpp).
//
// After the cards, rank r copies every rank j's block straight from j's input into block
// j of its own output (its own block too, unless in place: send == recv + r * count);
// then finish(), because peers read its input until they are done. Memory traffic per
// rank: n - 1 (or n) blocks copied, against shm_direct's own block copied in and n
// blocks copied out.
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "algorithms/window.hpp"
#include "core/copy.hpp"

namespace chorus::algorithms {

void allgather_shm_window(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const int n = transport.size();
  const int r = transport.rank();
  const std::size_t block = bytes_of(args.count, args.dtype);
  WindowCall call(transport, args, block, block * static_cast<std::size_t>(n));
  if (!call.usable()) return run_shm_direct_instead(transport, args, allgather_shm_direct);
  for (int step = 0; step < n; ++step) {
    const int j = (r + step) % n;  // own block first, then the peers in a staggered order
    std::byte* out = call.recv(r) + block * static_cast<std::size_t>(j);
    if (out != call.send(j)) copy_bytes(out, call.send(j), block);
  }
  call.finish();
}

}  // namespace chorus::algorithms
