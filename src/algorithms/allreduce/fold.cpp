#include "algorithms/allreduce/fold.hpp"

#include "algorithms/partials.hpp"
#include "core/reduce.hpp"

namespace chorus::algorithms {

bool fold_in_extra_rank(RequestSet& requests, const Call& args,
                        const patterns::RecursiveDoubling& plan, void* work, DataType work_type) {
  const std::size_t bytes = bytes_of(args.count, args.dtype);
  if (plan.is_extra) {
    // Two waits: in place, the receive writes the buffer the send reads.
    requests.send(plan.fold_partner, args.send, bytes);
    requests.wait();
    requests.recv(plan.fold_partner, args.recv, bytes);
    requests.wait();
    return true;
  }
  if (plan.fold_partner < 0) {
    convert(args.send, args.dtype, work, work_type, args.count);
    return false;
  }
  Scratch incoming(args.count, args.dtype);
  requests.recv(plan.fold_partner, incoming.data(), bytes);
  requests.wait();
  reduce_operands(work, work_type, {args.send, args.dtype}, {incoming.data(), args.dtype},
                  args.count, args.op);
  return false;
}

void fold_out_extra_rank(RequestSet& requests, const Call& args,
                         const patterns::RecursiveDoubling& plan) {
  if (plan.fold_partner < 0) return;
  requests.send(plan.fold_partner, args.recv, bytes_of(args.count, args.dtype));
  requests.wait();
}

}  // namespace chorus::algorithms
