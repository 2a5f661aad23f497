// All-reduce = binomial reduce to rank 0 + binomial broadcast from rank 0.
//
// The reduce leaves the full result in rank 0's `recv`; broadcasting that
// buffer in place hands it to everyone. 2 ceil(log2 n) steps of the full
// buffer; simple and exact about who reduces what (one tree, one order), which
// makes it a reference for the faster algorithms.
//
// Both halves run under this call's fingerprint. That is safe because messages
// between a pair arrive in the order they were posted and both sides post the
// reduce's messages before the broadcast's.
#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace chorus::algorithms {

void allreduce_reduce_broadcast(transport::Transport& transport, const CollectiveArgs& args) {
  if (finish_trivial_call(transport, args)) return;
  CollectiveArgs reduce_args = args;
  reduce_args.root = 0;
  reduce_binomial(transport, reduce_args);
  CollectiveArgs broadcast_args = args;
  broadcast_args.root = 0;
  broadcast_args.send = args.recv;
  broadcast_binomial(transport, broadcast_args);
}

}  // namespace chorus::algorithms
