// The objects behind the C ABI's opaque handles, and the one place where C++
// exceptions become chorusResult_t codes.
//
// Contract of every entry point: no exception crosses the C boundary. A failure
// returns its code and leaves a sentence "chorusXxx: why" in two places: the
// communicator's error slot (chorusGetLastError(comm)) and the calling thread's
// last error (chorusGetLastError(NULL)).
//
// Handle lifetime: a chorusComm lives from chorusCommInit/Split to
// chorusCommDestroy, a chorusRequest until the chorusWait, or the chorusTest
// reporting done, that releases it. Handles are looked up in a HandleTable
// (handle_table.hpp) by every entry point, so a destroyed communicator or a
// released request (and any value that never was a handle) fails the call with a
// sentence instead of being dereferenced: chorusInvalidUsage for a destroyed or
// released handle, chorusInvalidArgument for NULL or a value that never was one.
// A communicator destroyed while another thread is inside a call on it goes when
// that call returns; later calls on it fail. Destroying a communicator lets its
// pending operations finish first (each bounded by CHORUS_TIMEOUT); their requests
// stay valid. chorusCommAbort does not free the communicator (see chorus.cpp).
#pragma once

#include <chorus/chorus.h>

#include "capi/handle_table.hpp"

#include <chorus/communicator.hpp>
#include <chorus/error.hpp>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>

namespace chorus::capi {

/// The last failure sentence of one communicator. Shared by the communicator
/// and its requests, so a request completed after chorusCommDestroy still has
/// somewhere to write. Thread-safe.
class ErrorSlot {
 public:
  void set(std::string_view message);
  std::string get() const;

 private:
  mutable std::mutex mutex_;
  std::string message_;
};

}  // namespace chorus::capi

struct chorusComm {
  chorus::Communicator communicator;
  std::shared_ptr<chorus::capi::ErrorSlot> errors = std::make_shared<chorus::capi::ErrorSlot>();
};

struct chorusRequest {
  chorus::Request request;
  std::shared_ptr<chorus::capi::ErrorSlot> errors;  ///< the issuing communicator's slot
};

namespace chorus::capi {

using CommTable = HandleTable<chorusComm, chorusComm_t>;
using RequestTable = HandleTable<chorusRequest, chorusRequest_t>;
/// Every live communicator and request handle of the process.
inline constinit CommTable comms;
inline constinit RequestTable requests;
static_assert(std::is_trivially_destructible_v<CommTable>, "usable until the process ends");

/// Records a failure of `function` in `slot` (when not null) and in the calling
/// thread's last error, and returns `code`. Never throws.
chorusResult_t fail(ErrorSlot* slot, const char* function, chorusResult_t code,
                    std::string_view message) noexcept;

/// The calling thread's last failure sentence ("" when none); valid until this
/// thread's next failing call.
const char* thread_last_error() noexcept;

/// The C code of a C++ status. An Error never carries Success, and a value
/// outside the enum is a bug: both map to chorusInternalError.
chorusResult_t to_result(Status status) noexcept;

/// The int a C caller stored in an enum parameter. C callers may pass any int
/// ((chorusDataType_t)99), but in C++ loading a value outside the enum's range
/// is undefined, so the bytes are copied instead of the enum being loaded.
template <typename CEnum>
int raw_value(const CEnum& value) noexcept {
  static_assert(sizeof(CEnum) == sizeof(int), "C enums are int-sized");
  int raw;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

/// Range-checked conversions of the C enums (by reference, see raw_value);
/// throw Error(InvalidArgument).
DataType to_dtype(const chorusDataType_t& dtype);
ReduceOp to_op(const chorusRedOp_t& op);

/// Runs body(); returns chorusSuccess, or the code of whatever it threw.
template <typename Body>
chorusResult_t guarded(ErrorSlot* slot, const char* function, Body&& body) noexcept {
  try {
    body();
    return chorusSuccess;
  } catch (const Error& error) {
    return fail(slot, function, to_result(error.status()), error.what());
  } catch (const std::bad_alloc&) {
    return fail(slot, function, chorusSystemError, "out of memory");
  } catch (const std::exception& error) {
    return fail(slot, function, chorusInternalError, error.what());
  } catch (...) {
    return fail(slot, function, chorusInternalError, "an unknown exception was thrown");
  }
}

enum class HandleKind { Communicator, Request };

/// Records and returns the failure of `function` given a `kind` handle that is not
/// live (pin state `state`).
chorusResult_t not_live(const char* function, HandleState state, HandleKind kind) noexcept;

/// Makes a handle in `table` for a new object, then fill(object): when fill throws
/// or returns false, the handle is retired (and the object deleted) before
/// returning. So the handle exists before fill starts anything (joins a
/// communicator, issues an operation), which is then never left without one.
/// Returns the handle, or nullptr when fill returned false.
template <typename Object, typename Handle, typename Fill>
Handle make_handle(HandleTable<Object, Handle>& table, Fill&& fill) {
  const Handle handle = table.create(std::make_unique<Object>());
  typename HandleTable<Object, Handle>::Pin pin(table, handle);
  bool keep = false;
  try {
    keep = fill(*pin);
  } catch (...) {
    pin.retire();
    throw;
  }
  if (!keep) pin.retire();
  return keep ? handle : nullptr;
}

/// guarded(), for a live `comm`; body gets the handle's object, pinned for the call.
template <typename Body>
chorusResult_t with_comm_object(chorusComm_t comm, const char* function, Body&& body) noexcept {
  CommTable::Pin pin(comms, comm);
  if (!pin) return not_live(function, pin.state(), HandleKind::Communicator);
  return guarded(pin->errors.get(), function, [&] { body(*pin); });
}

/// with_comm_object(); body gets the Communicator.
template <typename Body>
chorusResult_t with_comm(chorusComm_t comm, const char* function, Body&& body) noexcept {
  return with_comm_object(comm, function, [&](chorusComm& object) { body(object.communicator); });
}

/// Issues a non-blocking operation: issue(communicator) returns its Request,
/// which is wrapped in a new handle at *request (NULL whenever the call fails).
template <typename Issue>
chorusResult_t issue(chorusComm_t comm, chorusRequest_t* request, const char* function,
                     Issue&& issue_operation) noexcept {
  if (request != nullptr) *request = nullptr;
  return with_comm_object(comm, function, [&](chorusComm& object) {
    require_argument(request != nullptr, "the request out-pointer is NULL");
    *request = make_handle(requests, [&](chorusRequest& made) {
      made.errors = object.errors;
      made.request = issue_operation(object.communicator);
      return true;
    });
  });
}

}  // namespace chorus::capi
