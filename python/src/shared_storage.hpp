// CHORUS_TORCH_SHARED_BUCKETS: all-reduced tensors moved into host-shared memory.
//
// With the variable at 1, a tensor passed to allreduce that is a whole storage of at least
// kSharedMinBytes has that storage's memory replaced, on its first all-reduce, by memory from
// Communicator::alloc_shared (its bytes copied over): every tensor viewing the storage keeps
// working, and this and every later all-reduce of it runs in place in the peers' memory
// (shm_window) instead of being copied through the arena. Meant for DistributedDataParallel's
// gradient buckets, which torch allocates once and all-reduces every step. Opt-in because a
// raw pointer taken before the move (a numpy view, data_ptr() kept aside) would point at
// the old, freed memory.
//
// Every rank decides from the tensor alone (its size and whether its storage was moved
// already), so ranks that all-reduce the same sequence of tensors, as DDP's do, move them
// in the same calls: the move is a collective (alloc_shared).
#pragma once

#include <chorus/communicator.hpp>

#include <ATen/ATen.h>

namespace chorus_torch {

inline constexpr std::size_t kSharedMinBytes = 64 * 1024;

/// CHORUS_TORCH_SHARED_BUCKETS: unset or "0" false, "1" true; any other value throws.
bool shared_buckets_from_env();

/// Whether `t` is a contiguous whole storage of at least kSharedMinBytes not moved yet.
bool wants_shared_storage(const at::Tensor& t);

/// Moves `t`'s storage into `comm`'s shared memory (collective over comm); the memory is
/// freed, on this rank, when the storage is. Throws chorus::Error (SystemError on every rank
/// alike) when the host's shared memory cannot hold it.
void move_into_shared_storage(const at::Tensor& t, chorus::Communicator& comm);

}  // namespace chorus_torch
