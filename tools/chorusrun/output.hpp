// --tag-output: relays the ranks' stdout/stderr line by line, each complete
// line prefixed with "[rank] ", so lines of different ranks never mix.
#pragma once

#include <poll.h>

#include <cstddef>
#include <string>
#include <vector>

namespace chorus::run {

class LineRelay {
 public:
  /// Longest line kept whole; a longer one is emitted in pieces of this size,
  /// each on its own prefixed line.
  static constexpr std::size_t kMaxLine = 64 * 1024;

  LineRelay() = default;
  ~LineRelay();
  LineRelay(const LineRelay&) = delete;
  LineRelay& operator=(const LineRelay&) = delete;

  /// Takes ownership of `fd` (the read end of a child's pipe; made non-blocking)
  /// whose lines go to `dest_fd` (1 or 2) with the prefix "[rank] ".
  void add(int fd, int rank, int dest_fd);
  /// One pollfd (POLLIN) per stream still open, for the caller's poll().
  void append_pollfds(std::vector<pollfd>* fds) const;
  /// Reads what every open stream has now, up to 256 KiB each (never blocks;
  /// poll again for the rest); emits complete lines;
  /// at end of file flushes the stream's partial last line and closes it.
  void read_available();
  bool has_open_streams() const;
  /// Flushes every partial line (a newline is added) and closes every stream.
  void close_all();

 private:
  struct Stream {
    int fd = -1;
    int dest_fd = 1;
    std::string prefix;
    std::string pending;  ///< bytes after the last newline
  };
  void read_stream(Stream& stream);
  void emit_complete_lines(Stream& stream);
  void flush_and_close(Stream& stream);

  std::vector<Stream> streams_;
};

/// Writes "chorusrun: LINE\n" to stderr.
void say(const std::string& line);

/// Seconds as messages show them ("%g": 0.5, 3, 300).
std::string seconds_text(double seconds);

/// Writes all of `data` to `fd` (retrying short writes, EINTR and EAGAIN);
/// gives up silently when the reader went away (EPIPE) or after ~10 s blocked.
void write_all(int fd, const std::string& data);

}  // namespace chorus::run
