// The C++ form of chorus_torch.allreduce_avg_hook, registered straight on a
// DistributedDataParallel model's Reducer (chorus_torch.register_avg_hook).
//
// The Python hook runs, for every bucket, a Python call under the GIL on the
// autograd thread and a Python `.then` callback under the GIL on the completion
// thread, and DDP takes the GIL a third time to read the callback's result. This
// hook does the same work (move the bucket into host-shared memory, all-reduce
// it with ReduceOp.AVG) without Python: its future is the work's own, whose
// value (the list holding the bucket) DDP reads in C++.
#pragma once

#include "process_group_chorus.hpp"

namespace c10d {
class Reducer;
}

namespace chorus_torch {

/// Registers the averaging hook over `group` on `reducer`. Throws (c10::Error) when the
/// reducer has a communication hook already: DDP allows one.
void register_avg_hook(c10d::Reducer& reducer, c10::intrusive_ptr<ProcessGroupChorus> group);

}  // namespace chorus_torch
