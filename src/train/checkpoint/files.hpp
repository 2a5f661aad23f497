// The file side of the checkpoint format: checksums, files written through a temporary and a
// rename, byte ranges read back with their size and checksum checked. Errors are
// chorus::Error(SystemError) with a sentence naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::train::detail {

/// A 64-bit checksum of `bytes`: any change of one 8-byte word changes it (each step is a
/// bijection of the running value), and the length is mixed in.
std::uint64_t checksum(std::string_view bytes);

/// "00c0ffee00c0ffee": 16 lowercase hex digits.
std::string to_hex(std::uint64_t value);

/// One contiguous run of bytes to write.
struct Bytes {
  const void* data = nullptr;
  std::size_t size = 0;
};

/// Writes the concatenation of `parts` to path + ".tmp" and renames it to `path`.
void write_file_atomically(const std::string& path, const std::vector<Bytes>& parts);

/// The whole file; SystemError "cannot read <what>: <reason>" (what: e.g. "checkpoint ck.pt").
std::string read_file(const std::string& path, const std::string& what);

/// Bytes [offset, offset + size) of data file `path`, after checking that the file has
/// `file_size` bytes (else "... is 100 bytes, the index records 200 (truncated or replaced)")
/// and that the bytes have checksum `sum` (else "... fails its checksum (corrupt)");
/// `what` names the piece in the sentences.
std::string read_checked_range(const std::string& path, std::int64_t file_size, std::int64_t offset,
                               std::int64_t size, std::uint64_t sum, const std::string& what);

}  // namespace chorus::train::detail
