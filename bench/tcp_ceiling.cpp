// tcp_ceiling: raw loopback TCP throughput, the ceiling any TCP collective on this machine runs
// under. Every byte sent over loopback is copied into the kernel by the sender and out of it by
// the receiver, so the CPU, not a wire, sets the rate; this tool measures that rate with nothing
// on top (no framing, no matching, large writes, optionally large socket buffers).
//
//   tcp_ceiling --shape ring --procs 4 --bytes 64M [--write 1M] [--read SIZE] [--buf 4M]
//               [--repeat 5]
// (--write/--read: bytes per send()/recv() call, --read defaults to --write; --buf: SO_SNDBUF
// and SO_RCVBUF, 0 for the kernel's autotuning)
//
// A shape is a set of processes and the one-way TCP connections between them; every connection
// carries --bytes. Each process drives all of its connections at once from one poll() loop, as
// a rank of a collective does:
//   pairs N   2N processes, N independent streams (2i -> 2i+1)
//   ring N    N processes, i -> i+1 mod N (N = 2: both directions between two processes)
//   fanin N   N senders -> 1 receiver (gather's root)
//   fanout N  1 sender -> N receivers (scatter's root)
//   all N     N processes, every i -> j (alltoall)
// The connections are made and the processes forked before the clock starts; each repeat
// starts all processes at once and ends when the last one is done. Prints one line per repeat
// and the median: seconds, aggregate GB/s (bytes over all connections / time), GB/s per stream.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Edge {
  int from, to;
  int send_fd = -1, recv_fd = -1;
};

struct Options {
  std::string shape = "ring";
  int procs = 2;
  std::size_t bytes = 64u << 20;
  std::size_t write = 1u << 20;
  std::size_t read = 0;  // 0: same as write
  int buf = 0;           // 0: kernel autotuning
  int repeat = 5;
};

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(2);
}

std::size_t parse_size(const char* text) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  switch (*end) {
    case 'K':
    case 'k':
      v *= 1024;
      break;
    case 'M':
    case 'm':
      v *= 1024 * 1024;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  return static_cast<std::size_t>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--shape")
      o.shape = v;
    else if (k == "--procs")
      o.procs = std::atoi(v);
    else if (k == "--bytes")
      o.bytes = parse_size(v);
    else if (k == "--write")
      o.write = parse_size(v);
    else if (k == "--read")
      o.read = parse_size(v);
    else if (k == "--buf")
      o.buf = static_cast<int>(parse_size(v));
    else if (k == "--repeat")
      o.repeat = std::atoi(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return o;
}

/// The processes (count) and connections of a shape with parameter n.
int make_shape(const std::string& shape, int n, std::vector<Edge>& edges) {
  if (shape == "pairs") {
    for (int i = 0; i < n; ++i) edges.push_back({2 * i, 2 * i + 1});
    return 2 * n;
  }
  if (shape == "ring") {
    for (int i = 0; i < n; ++i) edges.push_back({i, (i + 1) % n});
    return n;
  }
  if (shape == "fanin" || shape == "fanout") {
    for (int i = 1; i <= n; ++i) edges.push_back(shape == "fanin" ? Edge{i, 0} : Edge{0, i});
    return n + 1;
  }
  if (shape == "all") {
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (i != j) edges.push_back({i, j});
    return n;
  }
  std::fprintf(stderr, "unknown shape %s\n", shape.c_str());
  std::exit(2);
}

void set_buffers(int fd, int buf) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (buf > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/// One loopback connection per edge: send_fd at `from`, recv_fd at `to`.
void connect_edge(Edge& e, int buf) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) die("bind");
  socklen_t len = sizeof(addr);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  if (listen(listener, 1) != 0) die("listen");
  e.send_fd = socket(AF_INET, SOCK_STREAM, 0);
  if (buf > 0) {  // before connect, so the window scale is chosen for it
    setsockopt(e.send_fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    setsockopt(e.send_fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
    setsockopt(listener, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
    setsockopt(listener, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
  }
  if (connect(e.send_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) die("connect");
  e.recv_fd = accept(listener, nullptr, nullptr);
  if (e.recv_fd < 0) die("accept");
  close(listener);
  set_buffers(e.send_fd, buf);
  set_buffers(e.recv_fd, buf);
}

/// Moves --bytes over each connection of process `me`, all at once.
void transfer(int me, const std::vector<Edge>& edges, const Options& o, std::vector<char>& data) {
  struct Stream {
    int fd;
    bool sending;
    std::size_t done;
  };
  std::vector<Stream> streams;
  for (const Edge& e : edges) {
    if (e.from == me) streams.push_back({e.send_fd, true, 0});
    if (e.to == me) streams.push_back({e.recv_fd, false, 0});
  }
  std::size_t left = streams.size();
  std::vector<pollfd> fds;
  while (left > 0) {
    bool moved = false;
    for (Stream& s : streams) {
      if (s.done == o.bytes) continue;
      std::size_t want = std::min(s.sending ? o.write : o.read, o.bytes - s.done);
      ssize_t n = s.sending ? send(s.fd, data.data(), want, MSG_NOSIGNAL)
                            : recv(s.fd, data.data(), want, 0);
      if (n < 0 && errno != EAGAIN && errno != EINTR) die(s.sending ? "send" : "recv");
      if (n > 0) {
        s.done += static_cast<std::size_t>(n);
        moved = true;
        if (s.done == o.bytes) --left;
      }
    }
    if (moved || left == 0) continue;
    fds.clear();
    for (const Stream& s : streams) {
      if (s.done < o.bytes)
        fds.push_back({s.fd, static_cast<short>(s.sending ? POLLOUT : POLLIN), 0});
    }
    poll(fds.data(), fds.size(), 100);
  }
}

/// Process `me`: one transfer per token on its start pipe, a token on `done` after each.
[[noreturn]] void run_process(int me, int start, int done, const std::vector<Edge>& edges,
                              const Options& o) {
  std::vector<char> data(std::max(o.write, o.read), 'x');
  char token;
  for (int r = 0; r < o.repeat; ++r) {
    if (read(start, &token, 1) != 1) _exit(3);
    transfer(me, edges, o, data);
    if (write(done, &token, 1) != 1) _exit(3);
  }
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  if (o.read == 0) o.read = o.write;
  std::vector<Edge> edges;
  const int procs = make_shape(o.shape, o.procs, edges);
  for (Edge& e : edges) connect_edge(e, o.buf);
  // One start pipe per process, so that a process done early cannot take another's token.
  std::vector<int> start(procs);
  int done[2];
  if (pipe(done) != 0) die("pipe");
  std::vector<pid_t> children;
  for (int me = 0; me < procs; ++me) {
    int fds[2];
    if (pipe(fds) != 0) die("pipe");
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) run_process(me, fds[0], done[1], edges, o);
    close(fds[0]);
    start[me] = fds[1];
    children.push_back(pid);
  }
  const double total = static_cast<double>(o.bytes) * static_cast<double>(edges.size());
  std::vector<double> seconds;
  for (int r = 0; r < o.repeat; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int fd : start) {
      if (write(fd, "s", 1) != 1) die("write");
    }
    for (int i = 0; i < procs; ++i) {
      char token;
      if (read(done[0], &token, 1) != 1) die("read");
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    seconds.push_back(s);
    std::printf("repeat %d: %.4f s  aggregate %.2f GB/s  per stream %.2f GB/s\n", r, s,
                total / s / 1e9, total / s / 1e9 / static_cast<double>(edges.size()));
  }
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  std::printf(
      "shape=%s n=%d procs=%d streams=%zu bytes=%zu write=%zu buf=%d median %.4f s "
      "aggregate %.3f GB/s per_stream %.3f GB/s\n",
      o.shape.c_str(), o.procs, procs, edges.size(), o.bytes, o.write, o.buf, median,
      total / median / 1e9, total / median / 1e9 / static_cast<double>(edges.size()));
  return 0;
}
