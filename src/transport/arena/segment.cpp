// POSIX shared-memory segments.
#include "transport/arena/segment.hpp"

#include <chorus/error.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace chorus::transport {
namespace {

[[noreturn]] void throw_system(const std::string& what, int code) {
  throw Error(Status::SystemError, what + ": " + std::strerror(code));
}

/// Closes a descriptor on scope exit.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

/// Maps the whole segment with its page tables filled in (MAP_POPULATE): the
/// first collectives that touch a buffer then take no page faults.
std::byte* map_shared(int fd, std::size_t bytes, const std::string& name) {
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) throw_system("cannot map shared memory " + name, errno);
  return static_cast<std::byte*>(base);
}

}  // namespace

std::shared_ptr<Segment> Segment::create(const std::string& name, std::size_t bytes) {
  FdGuard fd{::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600)};
  if (fd.fd < 0) throw_system("cannot create shared memory " + name, errno);
  // From here on the name exists: unlink it again if anything below fails.
  try {
    if (::ftruncate(fd.fd, static_cast<off_t>(bytes)) != 0) {
      throw_system("cannot size shared memory " + name + " to " + std::to_string(bytes) + " bytes",
                   errno);
    }
    // Allocate every page now: a full /dev/shm is an error here, not a SIGBUS in
    // the middle of a collective.
    if (const int code = ::posix_fallocate(fd.fd, 0, static_cast<off_t>(bytes)); code != 0) {
      throw_system("cannot allocate " + std::to_string(bytes) + " bytes of shared memory for " +
                       name + " (is /dev/shm full or too small?)",
                   code);
    }
    std::byte* base = map_shared(fd.fd, bytes, name);
    return std::shared_ptr<Segment>(new Segment(name, base, bytes, /*owner=*/true));
  } catch (...) {
    ::shm_unlink(name.c_str());
    throw;
  }
}

std::shared_ptr<Segment> Segment::open(const std::string& name, std::size_t bytes) {
  FdGuard fd{::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600)};
  if (fd.fd < 0) throw_system("cannot open shared memory " + name, errno);
  struct stat info {};
  if (::fstat(fd.fd, &info) != 0) throw_system("cannot stat shared memory " + name, errno);
  if (static_cast<std::size_t>(info.st_size) != bytes) {
    throw Error(Status::InternalError, "shared memory " + name + " has " +
                                           std::to_string(info.st_size) + " bytes, expected " +
                                           std::to_string(bytes));
  }
  std::byte* base = map_shared(fd.fd, bytes, name);
  return std::shared_ptr<Segment>(new Segment(name, base, bytes, /*owner=*/false));
}

Segment::~Segment() {
  unlink();
  ::munmap(base_, size_);
}

void Segment::unlink() noexcept {
  if (!linked_) return;
  ::shm_unlink(name_.c_str());
  linked_ = false;
}

}  // namespace chorus::transport
