// Rabenseifner's all-reduce: reduce-scatter by recursive halving, then
// all-gather by recursive doubling.
//
// On p = 2^m ranks the buffer is cut into p groups. Halving round j sends half
// of the current window (n / 2^(j+1) groups' worth) and reduces the other half,
// so the reduce-scatter moves (1/2 + 1/4 + ... ) = (p - 1)/p of the buffer in
// log2 p rounds and leaves rank r with group r reduced; the all-gather moves
// the same volume back in log2 p rounds. Total: 2 log2 p latencies and
// 2 (p - 1)/p of the buffer, i.e. the ring's volume with the tree's latency.
//
// A non-power of two n = p + e folds the e extra ranks in first, as MPICH
// does: extra rank p + i sends its whole input to core rank i, which reduces
// it into its own, and gets the result back at the end
// (patterns/recursive_doubling.hpp). The extras cost one more buffer transfer
// each way.
#include "algorithms/allreduce/fold.hpp"
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "algorithms/patterns/recursive_doubling.hpp"
#include "core/reduce.hpp"

namespace chorus::algorithms {

void allreduce_rabenseifner(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  const auto plan = patterns::recursive_doubling(transport.rank(), transport.size());
  RequestSet requests(transport, args);
  if (fold_in_extra_rank(requests, args, plan)) return;
  const CoreGroups groups{args.count, 1, plan.core_size};
  halving_reduce_scatter_pass(transport, args, args.recv, groups);
  doubling_allgather_pass(transport, args, args.recv, groups);
  fold_out_extra_rank(requests, args, plan);
}

}  // namespace chorus::algorithms
