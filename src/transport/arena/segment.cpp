// Shared-memory segments on anonymous memory files.
#include "transport/arena/segment.hpp"

#include <chorus/error.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace chorus::transport {
namespace {

[[noreturn]] void throw_system(const std::string& what, int code) {
  throw Error(Status::SystemError, what + ": " + std::strerror(code));
}

/// Closes a descriptor on scope exit unless released.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

/// Maps the whole segment; `populate`: with its page tables filled in (MAP_POPULATE).
std::byte* map_shared(int fd, std::size_t bytes, const std::string& name, bool populate) {
  const int flags = MAP_SHARED | (populate ? MAP_POPULATE : 0);
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, fd, 0);
  if (base == MAP_FAILED) throw_system("cannot map shared memory " + name, errno);
  return static_cast<std::byte*>(base);
}

}  // namespace

std::shared_ptr<Segment> Segment::create(const std::string& name, std::size_t bytes,
                                         bool map_whole) {
  const std::string label = name.empty() || name[0] != '/' ? name : name.substr(1);
  FdGuard fd{::memfd_create(label.c_str(), MFD_CLOEXEC)};
  if (fd.fd < 0) throw_system("cannot create shared memory " + name, errno);
  if (::ftruncate(fd.fd, static_cast<off_t>(bytes)) != 0) {
    throw_system("cannot size shared memory " + name + " to " + std::to_string(bytes) + " bytes",
                 errno);
  }
  if (const int code = ::posix_fallocate(fd.fd, 0, static_cast<off_t>(bytes)); code != 0) {
    throw_system("cannot allocate " + std::to_string(bytes) + " bytes of shared memory for " + name,
                 code);
  }
  std::byte* base = map_shared(fd.fd, bytes, name, map_whole);
  std::shared_ptr<Segment> segment(new Segment(name, base, bytes, fd.release()));
  segment->server_ = std::make_unique<FdServer>(segment->fd_);
  segment->locator_ = segment->server_->name();
  return segment;
}

std::shared_ptr<Segment> Segment::open(const std::string& locator, std::size_t bytes,
                                       Deadline deadline) {
  FdGuard fd{receive_fd(locator, deadline)};
  struct stat info {};
  if (::fstat(fd.fd, &info) != 0) throw_system("cannot stat shared memory @" + locator, errno);
  if (static_cast<std::size_t>(info.st_size) != bytes) {
    throw Error(Status::InternalError, "shared memory @" + locator + " has " +
                                           std::to_string(info.st_size) + " bytes, expected " +
                                           std::to_string(bytes));
  }
  std::byte* base = map_shared(fd.fd, bytes, "@" + locator, /*populate=*/false);
  return std::shared_ptr<Segment>(new Segment("@" + locator, base, bytes, -1));
}

SegmentNotice SegmentNotice::parse(const std::string& text) {
  const std::size_t space = text.find(' ');
  if (space == std::string::npos) return {text, ""};
  return {text.substr(0, space), text.substr(space + 1)};
}

void Segment::populate(std::size_t offset, std::size_t bytes) noexcept {
  if (offset >= size_ || bytes == 0) return;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t begin = offset / page * page;  // mmap's base is page aligned
  const std::size_t end = offset + std::min(bytes, size_ - offset);
  ::madvise(base_ + begin, end - begin, MADV_POPULATE_WRITE);
}

Segment::~Segment() {
  withdraw();
  ::munmap(base_, size_);
}

void Segment::withdraw() noexcept {
  server_.reset();  // stops handing fd_ out first
  locator_.clear();
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
}

}  // namespace chorus::transport
