// The fuzz harnesses: each takes arbitrary bytes, drives one decoder of hostile
// input through the library's own code, and returns normally unless that code
// misbehaves (a sanitizer report, an unexpected exception type, a broken
// round-trip invariant aborts). libFuzzer calls them through fuzz_entry.cpp;
// test_fuzz_inputs.cpp feeds the committed corpus and regressions through them
// in the normal build.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chorus::fuzz {

/// A store request frame (header + body) as the store server decodes it.
void store_request(const std::uint8_t* data, std::size_t size);
/// The connection handshake; the first byte picks the role (even: we are the
/// client reading a hostile server, odd: we are the server reading a hostile client).
void handshake(const std::uint8_t* data, std::size_t size);
/// A byte stream arriving on a data link, decoded by PeerChannel; the first
/// bytes choose the receives posted and how the stream is split into reads.
void frames(const std::uint8_t* data, std::size_t size);

/// Aborts with `what` when `condition` is false (a broken invariant is a finding).
void require(bool condition, const char* what);

}  // namespace chorus::fuzz
