// Checksums and checked file I/O of the checkpoint format; see files.hpp.
#include "files.hpp"

#include <chorus/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace chorus::train::detail {
namespace {

constexpr std::uint64_t kMultiplier = 0x9e3779b97f4a7c15ULL;  // odd: multiplication is a bijection

std::uint64_t rotate(std::uint64_t x, int bits) { return (x << bits) | (x >> (64 - bits)); }

/// SplitMix64's finaliser.
std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Error io_error(const std::string& what) {
  return Error(Status::SystemError, what + ": " + std::strerror(errno));
}

/// A file descriptor closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

void write_all(int fd, const Bytes& part, const std::string& path) {
  const auto* p = static_cast<const char*>(part.data);
  std::size_t left = part.size;
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw io_error("cannot write " + path);
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

std::uint64_t checksum(std::string_view bytes) {
  std::uint64_t h = mix(bytes.size());
  std::size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    h = rotate(h ^ word, 29) * kMultiplier;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  return mix(rotate(h ^ tail, 29) * kMultiplier);
}

std::string to_hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

void write_file_atomically(const std::string& path, const std::vector<Bytes>& parts) {
  const std::string tmp = path + ".tmp";
  {
    const Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) throw io_error("cannot create " + tmp);
    for (const Bytes& part : parts) write_all(fd.get(), part, tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const Error error = io_error("rename " + tmp + " -> " + path);
    std::remove(tmp.c_str());
    throw error;
  }
}

std::string read_file(const std::string& path, const std::string& what) {
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw io_error("cannot read " + what);
  std::string out;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw io_error("cannot read " + what);
    if (n == 0) return out;
    out.append(buffer, static_cast<std::size_t>(n));
  }
}

std::string read_checked_range(const std::string& path, std::int64_t file_size, std::int64_t offset,
                               std::int64_t size, std::uint64_t sum, const std::string& what) {
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw io_error(what + ": cannot open data file " + path);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw io_error(what + ": cannot stat " + path);
  if (info.st_size != file_size) {
    throw Error(Status::SystemError, what + ": data file " + path + " is " +
                                         std::to_string(info.st_size) +
                                         " bytes, the index records " + std::to_string(file_size) +
                                         " (truncated or replaced)");
  }
  std::string out(static_cast<std::size_t>(size), '\0');
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd.get(), out.data() + done, out.size() - done,
                              static_cast<off_t>(offset + static_cast<std::int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw io_error(what + ": cannot read data file " + path);
    done += static_cast<std::size_t>(n);
  }
  if (checksum(out) != sum) {
    throw Error(Status::SystemError, what + ": bytes [" + std::to_string(offset) + ", " +
                                         std::to_string(offset + size) + ") of data file " + path +
                                         " fail their checksum (corrupt)");
  }
  return out;
}

}  // namespace chorus::train::detail
