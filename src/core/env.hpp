// CHORUS_* environment knobs (the README has the table).
#pragma once

#include <chrono>
#include <string>

namespace chorus {

enum class LogLevel : int { Error = 0, Warn = 1, Info = 2, Trace = 3 };

struct Config {
  std::chrono::milliseconds timeout{
      std::chrono::seconds(300)};  ///< CHORUS_TIMEOUT (seconds, may be fractional)
  std::string transport = "auto";  ///< CHORUS_TRANSPORT: auto | tcp | shm
  std::string algo;  ///< CHORUS_ALGO: "" or "ring" or "allreduce=ring,broadcast=binomial"
  LogLevel log_level = LogLevel::Warn;  ///< CHORUS_DEBUG: ERROR | WARN | INFO | TRACE
  std::string auth_token;               ///< CHORUS_AUTH_TOKEN
  std::string socket_ifname;  ///< CHORUS_SOCKET_IFNAME: interface names or a local address
  std::string tuning_file;    ///< CHORUS_TUNING_FILE: cost-model parameters (chorus-perf --tune)
  bool cma = true;            ///< CHORUS_CMA: 0 or 1; 0 never runs the cma algorithms
};

/// Reads the CHORUS_* variables now. Malformed values throw Error(InvalidArgument).
Config read_config();

/// Value of an environment variable, or `fallback` when unset or empty.
std::string env_or(const char* name, const std::string& fallback);

/// A boolean CHORUS_* variable: `fallback` when unset or empty, "0" false, "1" true; any
/// other value throws Error(InvalidArgument) "NAME must be 0 or 1, got 'VALUE'".
bool env_flag(const char* name, bool fallback);

}  // namespace chorus
