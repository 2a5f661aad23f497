// Line-prefixing output relay (see output.hpp).
#include "output.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace chorus::run {

void write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  int stalls = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && stalls++ < 10) {
      pollfd out{fd, POLLOUT, 0};
      poll(&out, 1, 1000);
      continue;
    }
    return;  // EPIPE and other errors: nobody reads this output any more
  }
}

void say(const std::string& line) { write_all(2, "chorusrun: " + line + "\n"); }

std::string seconds_text(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", seconds);
  return buffer;
}

LineRelay::~LineRelay() { close_all(); }

void LineRelay::add(int fd, int rank, int dest_fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::string prefix = "[";  // appended: see core/log.cpp on GCC 12's -Wrestrict at -O3
  prefix.append(std::to_string(rank)).append("] ");
  streams_.push_back(Stream{fd, dest_fd, std::move(prefix), {}});
}

void LineRelay::append_pollfds(std::vector<pollfd>* fds) const {
  for (const Stream& stream : streams_) {
    if (stream.fd >= 0) fds->push_back(pollfd{stream.fd, POLLIN, 0});
  }
}

bool LineRelay::has_open_streams() const {
  for (const Stream& stream : streams_) {
    if (stream.fd >= 0) return true;
  }
  return false;
}

void LineRelay::read_available() {
  for (Stream& stream : streams_) {
    if (stream.fd >= 0) read_stream(stream);
  }
}

void LineRelay::close_all() {
  for (Stream& stream : streams_) {
    if (stream.fd >= 0) flush_and_close(stream);
  }
}

// Reads at most kReadsPerPass buffers, so that a rank that writes without
// pause cannot keep the launcher's loop from its signals and deadlines.
void LineRelay::read_stream(Stream& stream) {
  constexpr int kReadsPerPass = 16;
  char buffer[16384];
  for (int reads = 0; reads < kReadsPerPass; ++reads) {
    ssize_t n = read(stream.fd, buffer, sizeof buffer);
    if (n > 0) {
      stream.pending.append(buffer, static_cast<std::size_t>(n));
      emit_complete_lines(stream);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    flush_and_close(stream);  // end of file, or an error that ends the stream
    return;
  }
}

// Emits every complete line of `pending` in one write, so that one rank's burst
// stays together; lines longer than kMaxLine are cut into kMaxLine pieces.
void LineRelay::emit_complete_lines(Stream& stream) {
  std::string out;
  std::size_t start = 0;
  for (;;) {
    std::size_t newline = stream.pending.find('\n', start);
    std::size_t end = newline == std::string::npos ? stream.pending.size() : newline;
    if (end - start > kMaxLine)
      end = start + kMaxLine;
    else if (newline == std::string::npos)
      break;
    out += stream.prefix;
    out.append(stream.pending, start, end - start);
    out += '\n';
    start = end == newline ? end + 1 : end;
  }
  stream.pending.erase(0, start);
  if (!out.empty()) write_all(stream.dest_fd, out);
}

void LineRelay::flush_and_close(Stream& stream) {
  if (!stream.pending.empty()) {
    write_all(stream.dest_fd, stream.prefix + stream.pending + "\n");
    stream.pending.clear();
  }
  close(stream.fd);
  stream.fd = -1;
}

}  // namespace chorus::run
