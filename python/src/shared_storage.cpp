// CHORUS_TORCH_SHARED_BUCKETS; see shared_storage.hpp.
#include "shared_storage.hpp"

#include "core/env.hpp"

#include <chorus/error.hpp>

#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace chorus_torch {
namespace {

/// What the storage's deleter needs: the communicator the memory came from.
struct SharedMemory {
  chorus::Communicator comm;
  void* data;
};

void free_shared_memory(void* context) {
  auto* memory = static_cast<SharedMemory*>(context);
  try {
    memory->comm.free_shared(memory->data);
  } catch (const std::exception&) {
    // Only a pointer alloc_shared did not return throws; this one it did.
  }
  delete memory;
}

}  // namespace

bool shared_buckets_from_env() {
  try {
    return chorus::env_flag("CHORUS_TORCH_SHARED_BUCKETS", false);
  } catch (const chorus::Error& e) {
    TORCH_CHECK(false, "chorus: ", e.what());
  }
}

bool wants_shared_storage(const at::Tensor& t) {
  if (!t.is_contiguous() || t.storage_offset() != 0 || !t.has_storage()) return false;
  const std::size_t bytes = static_cast<std::size_t>(t.numel()) * t.element_size();
  return bytes >= kSharedMinBytes && t.storage().nbytes() == bytes &&
         t.storage().data_ptr().get_deleter() != &free_shared_memory;
}

void move_into_shared_storage(const at::Tensor& t, chorus::Communicator& comm) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  const std::size_t bytes = storage->nbytes();
  void* data = comm.alloc_shared(bytes);
  std::memcpy(data, storage->data(), bytes);
  auto* memory = new SharedMemory{comm, data};
  storage->set_data_ptr_noswap(
      at::DataPtr(data, memory, &free_shared_memory, at::Device(at::kCPU)));
}

}  // namespace chorus_torch
