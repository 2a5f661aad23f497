// Reduce-scatter on buffers inside shared windows (algorithms/window.hpp).
//
// After the cards, rank r reduces block r of every rank's input (n blocks of `count`
// elements each) straight into its own output, chunk by chunk; then finish(), because
// peers read its input until they are done. In place (recv == send + r * count) is safe:
// block r of any rank's input is read by rank r alone. Memory traffic per rank: n blocks
// read, one written, against shm_direct's n blocks copied in and n read back.
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "algorithms/window.hpp"

#include <algorithm>

namespace chorus::algorithms {

void reduce_scatter_shm_window(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const int n = transport.size();
  const int r = transport.rank();
  const std::size_t block = bytes_of(args.count, args.dtype);
  WindowCall call(transport, args, block * static_cast<std::size_t>(n), block);
  if (!call.usable()) return run_shm_direct_instead(transport, args, reduce_scatter_shm_direct);
  const std::size_t chunk = call.chunk_elements();
  const std::size_t own = static_cast<std::size_t>(r) * args.count;
  for (std::size_t done = 0; done < args.count; done += chunk) {
    const std::size_t c = std::min(chunk, args.count - done);
    call.reduce_inputs(own + done, c, element_at(call.recv(r), done, args.dtype));
  }
  if (args.average_folded) *args.average_folded = true;
  call.finish();
}

}  // namespace chorus::algorithms
