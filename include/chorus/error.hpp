// Chorus error model inside C++: every failure is a chorus::Error carrying a
// Status and a human sentence. The C ABI turns it into a chorusResult_t and
// keeps the sentence for chorusGetLastError. See docs/errors.md.
#pragma once

#include <chorus/types.hpp>

#include <stdexcept>
#include <string>

namespace chorus {

class CHORUS_EXPORT Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

/// Throws Error(InvalidArgument, message) when `condition` is false.
inline void require_argument(bool condition, const std::string& message) {
  if (!condition) throw Error(Status::InvalidArgument, message);
}

}  // namespace chorus
