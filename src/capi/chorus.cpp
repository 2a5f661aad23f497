// The C ABI (include/chorus/chorus.h): error strings, communicator lifecycle and
// requests. Collectives are in collectives.cpp; the exception-to-code boundary
// and the handle lifetimes are described in handles.hpp.
//
// chorusCommAbort does not free the handle: it fails every pending and later
// operation (chorusInvalidUsage here, chorusRemoteError on peers that notice),
// and chorusCommDestroy must still be called. An abort may come from another
// thread while this one is blocked in a call on the same communicator, which
// would be a use-after-free if abort released it.
#include <memory>
#include <string>

#include "capi/handles.hpp"

namespace {

using chorus::Communicator;
using chorus::require_argument;
using chorus::capi::comms;
using chorus::capi::guarded;
using chorus::capi::HandleKind;
using chorus::capi::make_handle;
using chorus::capi::not_live;
using chorus::capi::requests;
using chorus::capi::with_comm;

// The C enums mirror the C++ ones value for value (types.hpp relies on it).
static_assert(static_cast<int>(chorusInProgress) == static_cast<int>(chorus::Status::InProgress));
static_assert(static_cast<int>(chorusFloat64) == static_cast<int>(chorus::DataType::Float64));
static_assert(static_cast<int>(chorusAvg) == static_cast<int>(chorus::ReduceOp::Avg));

/// Joins a communicator into a new handle at *out (NULL when join returns an empty
/// one). The handle is made first, so a joined communicator is never dropped for
/// lack of memory.
template <typename Join>
void adopt(chorusComm_t* out, Join&& join) {
  *out = make_handle(comms, [&](chorusComm& made) {
    made.communicator = join();
    return static_cast<bool>(made.communicator);
  });
}

}  // namespace

extern "C" {

const char* chorusGetErrorString(chorusResult_t result) {
  switch (chorus::capi::raw_value(result)) {
    case chorusSuccess:
      return "no error";
    case chorusInvalidArgument:
      return "invalid argument";
    case chorusInvalidUsage:
      return "invalid usage";
    case chorusSystemError:
      return "system error";
    case chorusRemoteError:
      return "remote error: a peer failed or went away";
    case chorusTimeout:
      return "timeout";
    case chorusMismatch:
      return "mismatch: ranks called different collectives";
    case chorusInternalError:
      return "internal error";
    case chorusInProgress:
      return "operation in progress";
  }
  return "unknown result code";
}

/// For a communicator, the sentence is copied into a thread-local buffer: the
/// pointer stays valid until this thread's next chorusGetLastError(comm) call,
/// whatever other threads do to the communicator meanwhile.
/// A handle that is not live has no sentence of its own: the thread's is returned.
const char* chorusGetLastError(chorusComm_t comm) {
  chorus::capi::CommTable::Pin pin(comms, comm);
  if (!pin) return chorus::capi::thread_last_error();
  thread_local std::string copy;
  try {
    copy = pin->errors->get();
  } catch (...) {
    copy.clear();  // out of memory: report no sentence rather than a stale one
  }
  return copy.c_str();
}

chorusResult_t chorusCommInitFromEnv(chorusComm_t* comm) {
  if (comm != nullptr) *comm = nullptr;
  return guarded(nullptr, __func__, [&] {
    require_argument(comm != nullptr, "the communicator out-pointer is NULL");
    adopt(comm, [] { return Communicator::init_from_env(); });
  });
}

chorusResult_t chorusCommInit(chorusComm_t* comm, int nranks, int rank,
                              const char* store_host_port) {
  if (comm != nullptr) *comm = nullptr;
  return guarded(nullptr, __func__, [&] {
    require_argument(comm != nullptr, "the communicator out-pointer is NULL");
    require_argument(store_host_port != nullptr, "the store address is NULL");
    chorus::InitOptions options;
    options.nranks = nranks;
    options.rank = rank;
    options.store_address = store_host_port;
    adopt(comm, [&] { return Communicator::init(options); });
  });
}

chorusResult_t chorusCommSplit(chorusComm_t comm, int color, int key, chorusComm_t* out) {
  if (out != nullptr) *out = nullptr;
  return with_comm(comm, __func__, [&](Communicator& parent) {
    require_argument(out != nullptr, "the communicator out-pointer is NULL");
    adopt(out, [&] { return parent.split(color, key); });
  });
}

/// The communicator goes now, or when the last call another thread is making on it returns.
chorusResult_t chorusCommDestroy(chorusComm_t comm) {
  chorus::capi::CommTable::Pin pin(comms, comm);
  if (!pin) return not_live(__func__, pin.state(), HandleKind::Communicator);
  if (pin.retire()) return chorusSuccess;
  return not_live(__func__, chorus::capi::HandleState::Stale, HandleKind::Communicator);
}

chorusResult_t chorusCommAbort(chorusComm_t comm) {
  return with_comm(comm, __func__, [](Communicator& communicator) { communicator.abort(); });
}

chorusResult_t chorusCommRank(chorusComm_t comm, int* rank) {
  return with_comm(comm, __func__, [&](Communicator& communicator) {
    require_argument(rank != nullptr, "the rank out-pointer is NULL");
    *rank = communicator.rank();
  });
}

chorusResult_t chorusCommSize(chorusComm_t comm, int* size) {
  return with_comm(comm, __func__, [&](Communicator& communicator) {
    require_argument(size != nullptr, "the size out-pointer is NULL");
    *size = communicator.size();
  });
}

chorusResult_t chorusMemAlloc(chorusComm_t comm, size_t bytes, void** ptr) {
  return with_comm(comm, __func__, [&](Communicator& communicator) {
    require_argument(ptr != nullptr, "the pointer out-pointer is NULL");
    *ptr = communicator.alloc_shared(bytes);
  });
}

chorusResult_t chorusMemFree(chorusComm_t comm, void* ptr) {
  return with_comm(comm, __func__,
                   [&](Communicator& communicator) { communicator.free_shared(ptr); });
}

chorusResult_t chorusWait(chorusRequest_t request) {
  chorus::capi::RequestTable::Pin pin(requests, request);
  if (!pin || !pin.retire()) {  // released whatever the outcome: by this pin's end
    return not_live(__func__, pin ? chorus::capi::HandleState::Stale : pin.state(),
                    HandleKind::Request);
  }
  return guarded(pin->errors.get(), __func__, [&] { pin->request.wait(); });
}

/// An exception from Request::test() is the operation's own failure, so the
/// request counts as complete and is released like a successful one.
chorusResult_t chorusTest(chorusRequest_t request, int* done) {
  chorus::capi::RequestTable::Pin pin(requests, request);
  if (!pin) return not_live(__func__, pin.state(), HandleKind::Request);
  bool complete = true;
  chorusResult_t result = guarded(pin->errors.get(), __func__, [&] {
    require_argument(done != nullptr, "the done out-pointer is NULL");
    complete = pin->request.test();
  });
  if (done == nullptr) return result;
  *done = complete ? 1 : 0;
  if (complete && !pin.retire()) {  // another thread's Wait or Test released it meanwhile
    return not_live(__func__, chorus::capi::HandleState::Stale, HandleKind::Request);
  }
  return result;
}

}  // extern "C"
