// Writing flight records to files: after a failure, and on SIGUSR1.
//
// Every communicator registers its executor here when it is created. A dump
// writes the record of every live communicator of the process, each to
// `${CHORUS_TRACE_DIR:-/tmp}/chorus-trace-<job>-<world rank>-<comm>.json`
// (written to a temporary name, then renamed: a reader never sees half a file),
// and logs each path at WARN.
//
// SIGUSR1: the first registration installs a handler unless the program already
// has one for SIGUSR1 (or CHORUS_TRACE_SIGNAL=0). The handler only writes one
// byte to a pipe (write() is async-signal-safe); a dumper thread, started at the
// same moment, blocks reading that pipe and does the dump outside signal context.
#pragma once

#include "comm/flight_recorder.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace chorus::detail {

class Executor;

/// The CHORUS_TRACE_* knobs.
struct TraceSettings {
  std::size_t buffer = 256;  ///< CHORUS_TRACE_BUFFER: operations kept per communicator; 0: off
  std::string dir = "/tmp";  ///< CHORUS_TRACE_DIR
  bool signal = true;        ///< CHORUS_TRACE_SIGNAL: 0 leaves SIGUSR1 alone
};

/// Reads the knobs now; a malformed value throws Error(InvalidArgument).
TraceSettings read_trace_settings();

/// A short hex id every rank of one job computes alike, from what they share: the
/// job's secret, the store's port and the namespace of the world communicator (a hash,
/// so the secret cannot be read back from a file name).
std::string trace_job_id(std::string_view secret, int store_port, std::string_view world_name);

/// "world", "world.split1.color0", ...: a communicator's store namespace without the
/// per-init prefix "chorus/g<N>/", slashes turned into dots.
std::string trace_comm_name(std::string_view store_namespace);

/// `dir`/chorus-trace-<job>-<world rank>-<comm>.json.
std::string trace_path(const std::string& dir, const TraceIdentity& identity);

/// Adds a communicator's executor to every later dump (until it is destroyed); the
/// first call with `signal` set installs the SIGUSR1 dumper.
void register_trace_source(const std::shared_ptr<Executor>& executor,
                           const TraceSettings& settings);

/// Writes the record of every live communicator of the process; `reason` goes into
/// the files ("timeout", "mismatch", "remote error", "SIGUSR1"). Never throws: a file
/// that cannot be written is logged and skipped.
void dump_all_traces(std::string_view reason) noexcept;

}  // namespace chorus::detail
