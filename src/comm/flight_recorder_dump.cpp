// The process-wide list of recorders, the dump to files and the SIGUSR1 dumper;
// see flight_recorder_dump.hpp.
#include "comm/flight_recorder_dump.hpp"

#include "bootstrap/auth.hpp"
#include "comm/executor.hpp"
#include "core/env.hpp"
#include "core/log.hpp"

#include <chorus/error.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace chorus::detail {
namespace {

/// Largest CHORUS_TRACE_BUFFER accepted (about 70 MB of entries per communicator).
constexpr std::size_t kMaxTraceBuffer = 1u << 18;

struct Source {
  std::weak_ptr<Executor> executor;
  std::string dir;
};

struct Registry {
  std::mutex mutex;  ///< guards sources; never held while a snapshot is taken
  std::vector<Source> sources;
  std::mutex dump_mutex;  ///< one dump at a time, so files and log lines do not interleave
};

Registry& registry() {
  static Registry* instance = new Registry;  // never destroyed: dumps may run during exit
  return *instance;
}

std::atomic<int> g_signal_pipe{-1};  ///< write end, for the SIGUSR1 handler
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free atomic");

/// Async-signal-safe: one write() to the pipe, errno preserved.
void on_sigusr1(int) {
  const int saved = errno;
  const char byte = 1;
  ssize_t ignored = ::write(g_signal_pipe.load(std::memory_order_relaxed), &byte, 1);
  (void)ignored;
  errno = saved;
}

void dumper_loop(int read_fd) {
  char bytes[64];
  for (;;) {
    ssize_t n = ::read(read_fd, bytes, sizeof(bytes));
    if (n > 0) {
      dump_all_traces("SIGUSR1");
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return;
    }
  }
}

/// Installs the handler and starts the dumper thread, unless SIGUSR1 already has a handler.
void install_signal_dumper() {
  struct sigaction current {};
  if (::sigaction(SIGUSR1, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) return;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  ::fcntl(fds[1], F_SETFL, O_NONBLOCK);  // a burst of signals must never block the handler
  g_signal_pipe.store(fds[1]);
  std::thread(dumper_loop, fds[0]).detach();
  struct sigaction action {};
  action.sa_handler = on_sigusr1;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &action, nullptr);
}

std::size_t parse_buffer(const std::string& text) {
  std::size_t value = 0;
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(text.data(), last, value);
  if (ec != std::errc() || end != last || value > kMaxTraceBuffer) {
    throw Error(Status::InvalidArgument,
                "CHORUS_TRACE_BUFFER must be a number of operations from 0 to " +
                    std::to_string(kMaxTraceBuffer) + ", got '" + text + "'");
  }
  return value;
}

/// Writes `text` to `path` through a temporary file; false (and errno) on failure.
bool write_file(const std::string& path, const std::string& text) {
  static std::atomic<unsigned> counter{0};
  const std::string temporary =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  std::FILE* file = std::fopen(temporary.c_str(), "w");
  if (!file) return false;
  bool ok = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  ok = std::fclose(file) == 0 && ok;
  if (ok && std::rename(temporary.c_str(), path.c_str()) == 0) return true;
  const int saved = errno;
  std::remove(temporary.c_str());
  errno = saved;
  return false;
}

void dump_one(const Source& source, std::string_view reason) {
  std::shared_ptr<Executor> executor = source.executor.lock();
  if (!executor) return;
  std::optional<TraceSnapshot> snapshot = executor->trace_snapshot();
  executor.reset();
  if (!snapshot) return;
  const std::string path = trace_path(source.dir, snapshot->identity);
  if (write_file(path, trace_json(*snapshot, reason))) {
    log(LogLevel::Warn, "flight recorder of communicator " + snapshot->identity.comm + " (" +
                            std::string(reason) + "): wrote " + path);
  } else {
    log(LogLevel::Warn, "flight recorder: cannot write " + path + ": " + std::strerror(errno));
  }
}

}  // namespace

TraceSettings read_trace_settings() {
  TraceSettings settings;
  settings.buffer = parse_buffer(env_or("CHORUS_TRACE_BUFFER", "256"));
  settings.dir = env_or("CHORUS_TRACE_DIR", "/tmp");
  settings.signal = env_flag("CHORUS_TRACE_SIGNAL", true);
  return settings;
}

std::string trace_job_id(std::string_view secret, int store_port, std::string_view world_name) {
  const std::string material = "chorus-trace-job\n" + std::string(secret) + "\n" +
                               std::to_string(store_port) + "\n" + std::string(world_name);
  const auth::Digest digest = auth::sha256(material);
  static const char kHex[] = "0123456789abcdef";
  std::string id;
  for (std::size_t i = 0; i < 6; ++i) {
    id += kHex[digest[i] >> 4];
    id += kHex[digest[i] & 15];
  }
  return id;
}

std::string trace_comm_name(std::string_view store_namespace) {
  std::string_view name = store_namespace;
  if (name.rfind("chorus/g", 0) == 0) {
    const std::size_t slash = name.find('/', 8);
    if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
  }
  std::string out(name);
  for (char& c : out) {
    if (c == '/') c = '.';
  }
  return out;
}

std::string trace_path(const std::string& dir, const TraceIdentity& identity) {
  return dir + "/chorus-trace-" + identity.job + "-" + std::to_string(identity.world_rank) + "-" +
         identity.comm + ".json";
}

void register_trace_source(const std::shared_ptr<Executor>& executor,
                           const TraceSettings& settings) {
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    std::erase_if(r.sources, [](const Source& s) { return s.executor.expired(); });
    r.sources.push_back(Source{executor, settings.dir});
  }
  if (settings.signal) {
    static std::once_flag installed;
    std::call_once(installed, install_signal_dumper);
  }
}

void dump_all_traces(std::string_view reason) noexcept {
  try {
    Registry& r = registry();
    std::lock_guard dump_lock(r.dump_mutex);
    std::vector<Source> sources;
    {
      std::lock_guard lock(r.mutex);
      sources = r.sources;
    }
    for (const Source& source : sources) dump_one(source, reason);
  } catch (const std::exception& e) {
    log(LogLevel::Warn, std::string("flight recorder: dump failed: ") + e.what());
  }
}

}  // namespace chorus::detail
