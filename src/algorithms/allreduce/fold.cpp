#include "algorithms/allreduce/fold.hpp"

#include "core/reduce.hpp"

namespace chorus::algorithms {

bool fold_in_extra_rank(RequestSet& requests, const CollectiveArgs& args,
                        const patterns::RecursiveDoubling& plan) {
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  if (plan.is_extra) {
    // Two waits: in place, the receive writes the buffer the send reads.
    requests.send(plan.fold_partner, args.send, bytes);
    requests.wait();
    requests.recv(plan.fold_partner, args.recv, bytes);
    requests.wait();
    return true;
  }
  copy_elements(args.recv, args.send, args.count, args.dtype);
  if (plan.fold_partner >= 0) {
    Scratch incoming(args.count, args.dtype);
    requests.recv(plan.fold_partner, incoming.data(), bytes);
    requests.wait();
    reduce_into(args.recv, args.recv, incoming.data(), args.count, args.dtype, args.op);
  }
  return false;
}

void fold_out_extra_rank(RequestSet& requests, const CollectiveArgs& args,
                         const patterns::RecursiveDoubling& plan) {
  if (plan.fold_partner < 0) return;
  requests.send(plan.fold_partner, args.recv, bytes_of(args.count, args.dtype));
  requests.wait();
}

}  // namespace chorus::algorithms
