// Reduce directly in the host arena: the all-reduce rounds of
// allreduce/shm_direct.cpp in which only the root keeps the result. Per round
// every rank copies its chunk in and posts; rank r reduces slice r of all
// buffers into its own buffer and posts again; the root copies every slice out.
// Small messages take one round in which only the root reduces all buffers.
#include "algorithms/allreduce/shm_direct.hpp"
#include "algorithms/catalog.hpp"

namespace chorus::algorithms {

void reduce_shm_direct(transport::Transport& transport, const CollectiveArgs& args) {
  reduce_through_arena(transport, args, transport.rank() == args.root);
}

}  // namespace chorus::algorithms
