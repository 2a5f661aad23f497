// The ABORT frame: how a broken transport tells its peers why.
// Payload: int32 Status (host order) followed by the sentence, UTF-8, no NUL.
#pragma once

#include "transport/frame.hpp"

#include <chorus/error.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace chorus::transport {

/// Header and payload of an ABORT frame, ready to write. Long sentences are cut.
std::vector<std::byte> make_abort_frame(Status status, const std::string& sentence);

/// The error a rank raises on receiving `payload` from `peer`: Mismatch when the
/// sender failed with a Mismatch, else RemoteError; "rank R aborted: <sentence>".
Error error_from_abort(int peer, std::span<const std::byte> payload);

}  // namespace chorus::transport
