// Reading the launcher's variables (see launch_env.hpp for the order).
#include "bootstrap/launch_env.hpp"

#include <chorus/error.hpp>

#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <vector>

namespace chorus {
namespace {

constexpr int kDefaultMasterPort = 29500;

class Variables {
 public:
  explicit Variables(const GetEnv& getenv_fn) : getenv_(getenv_fn) {}

  /// The value, or nullopt when unset or empty.
  std::optional<std::string> text(const char* name) const {
    if (!*name) return std::nullopt;
    const char* value = getenv_(name);
    if (!value || !*value) return std::nullopt;
    return std::string(value);
  }

  std::optional<long long> integer(const char* name) const {
    auto value = text(name);
    if (!value) return std::nullopt;
    long long parsed = 0;
    auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), parsed);
    if (ec != std::errc() || end != value->data() + value->size()) {
      throw Error(Status::InvalidArgument,
                  std::string(name) + " must be an integer, got '" + *value + "'");
    }
    return parsed;
  }

  long long required(const char* name, const char* source) const {
    auto value = integer(name);
    if (!value) {
      throw Error(Status::InvalidArgument,
                  std::string(name) + " is not set (the other " + source + " variables are)");
    }
    return *value;
  }

 private:
  const GetEnv& getenv_;
};

/// A launcher's variable names; "" where it has none.
struct Launcher {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;  ///< ranks on this node: equal to size means every rank is local
  const char* node_count;  ///< nodes in the job: 1 means every rank is local
  bool assume_local;       ///< no hint at all: treat as one node
  /// The store's host and port from the launcher's own variables, when neither
  /// CHORUS_STORE_* nor MASTER_* name them (nullptr, or nullopt: the defaults).
  std::optional<std::string> (*listed_host)(const Variables&);
  std::optional<int> (*listed_port)(const Variables&);
};

/// Slurm: the first host of the step's node list (loopback when it is the only one).
std::optional<std::string> slurm_host(const Variables& env) {
  for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST"}) {
    auto list = env.text(name);
    if (!list) continue;
    std::vector<std::string> hosts;
    try {
      hosts = expand_host_list(*list);
    } catch (const Error& e) {
      throw Error(Status::InvalidArgument,
                  std::string(name) + " is not a Slurm host list: " + e.what());
    }
    return hosts.size() == 1 ? std::string("127.0.0.1") : hosts.front();
  }
  return std::nullopt;
}

/// Slurm: a port derived from the job and step ids (a batch script has no step: 0).
std::optional<int> slurm_port(const Variables& env) {
  auto job = env.integer("SLURM_JOB_ID");
  if (!job) return std::nullopt;
  const long long step = env.integer("SLURM_STEP_ID").value_or(0);
  require_argument(*job >= 0, "SLURM_JOB_ID must not be negative, got " + std::to_string(*job));
  require_argument(step >= 0, "SLURM_STEP_ID must not be negative, got " + std::to_string(step));
  return slurm_store_port(static_cast<std::uint64_t>(*job), static_cast<std::uint64_t>(step));
}

constexpr Launcher kTorchrun{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                             "",         false,  nullptr,      nullptr};
constexpr Launcher kFallbacks[] = {
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "", "SLURM_NNODES", false,
     slurm_host, slurm_port},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", "", false, nullptr, nullptr},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "", true, nullptr,
     nullptr},
};

/// Why MASTER_ADDR is needed: the launcher's hints do not show every rank on this node.
/// "" when they do (so 127.0.0.1 serves).
std::string why_not_local(const Variables& env, const Launcher& launcher, long long size) {
  if (size == 1) return "";
  const std::string ranks = std::string(launcher.size) + "=" + std::to_string(size) + " ranks";
  if (auto local_size = env.integer(launcher.local_size)) {
    if (*local_size == size) return "";
    return std::string(launcher.local_size) + "=" + std::to_string(*local_size) + " of the " +
           ranks + " run on this host";
  }
  if (auto nodes = env.integer(launcher.node_count)) {
    if (*nodes == 1) return "";
    return std::string(launcher.node_count) + "=" + std::to_string(*nodes) + " hosts run the " +
           ranks;
  }
  if (launcher.assume_local) return "";
  const bool by_size = *launcher.local_size != '\0';
  const std::string hint = by_size ? launcher.local_size : launcher.node_count;
  return hint + " is not set, so Chorus assumed that the " + ranks + " may span several hosts (" +
         hint + "=" + (by_size ? std::to_string(size) : "1") + " says they all run on this one)";
}

/// CHORUS_STORE_ADDR (chorusrun's store), else MASTER_ADDR, else the launcher's node list,
/// else loopback when every rank runs on this host.
std::string store_host(const Variables& env, const Launcher& launcher, long long size) {
  if (auto addr = env.text("CHORUS_STORE_ADDR")) return *addr;
  if (auto addr = env.text("MASTER_ADDR")) return *addr;
  if (launcher.listed_host) {
    if (auto host = launcher.listed_host(env)) return *host;
  }
  std::string why = why_not_local(env, launcher, size);
  if (why.empty()) return "127.0.0.1";
  throw Error(Status::InvalidArgument, std::string("MASTER_ADDR is not set and ") + why + " (" +
                                           launcher.source +
                                           " variables): set MASTER_ADDR to the host of rank 0");
}

/// CHORUS_STORE_PORT (chorusrun's store, apart from the program's MASTER_PORT), else
/// MASTER_PORT, else the launcher's own, else torchrun's default.
int store_port(const Variables& env, const Launcher& launcher) {
  const char* name = env.text("CHORUS_STORE_PORT") ? "CHORUS_STORE_PORT" : "MASTER_PORT";
  std::optional<long long> port = env.integer(name);
  if (!port && launcher.listed_port) {
    if (auto listed = launcher.listed_port(env)) return *listed;
  }
  port = port.value_or(kDefaultMasterPort);
  require_argument(
      *port >= 1 && *port <= 65535,
      std::string(name) + " must be between 1 and 65535, got " + std::to_string(*port));
  return static_cast<int>(*port);
}

LaunchInfo read_with(const Variables& env, const Launcher& launcher) {
  long long rank = env.required(launcher.rank, launcher.source);
  long long size = env.required(launcher.size, launcher.source);
  long long local_rank = env.integer(launcher.local_rank).value_or(0);
  require_argument(
      size >= 1 && size <= 1'000'000,
      std::string(launcher.size) + " must be between 1 and 1000000, got " + std::to_string(size));
  require_argument(rank >= 0 && rank < size, std::string(launcher.rank) + "=" +
                                                 std::to_string(rank) + " must be in [0, " +
                                                 launcher.size + "=" + std::to_string(size) + ")");
  require_argument(local_rank >= 0 && local_rank < size,
                   std::string(launcher.local_rank) + "=" + std::to_string(local_rank) +
                       " must be in [0, " + std::to_string(size) + ")");
  LaunchInfo info;
  info.rank = static_cast<int>(rank);
  info.world_size = static_cast<int>(size);
  info.local_rank = static_cast<int>(local_rank);
  info.source = launcher.source;
  info.master_addr = store_host(env, launcher, size);
  info.master_port = store_port(env, launcher);
  const long long restart = env.integer("CHORUS_RESTART_COUNT").value_or(0);
  require_argument(restart >= 0 && restart <= 1'000'000,
                   std::string("CHORUS_RESTART_COUNT must be between 0 and 1000000, got ")
                       .append(std::to_string(restart)));
  info.restart = static_cast<int>(restart);
  return info;
}

}  // namespace

LaunchInfo read_launch_env(const GetEnv& getenv_fn) {
  Variables env(getenv_fn);
  if (env.text(kTorchrun.rank) || env.text(kTorchrun.size)) return read_with(env, kTorchrun);
  for (const Launcher& launcher : kFallbacks) {
    if (env.text(launcher.rank)) return read_with(env, launcher);
  }
  throw Error(Status::InvalidArgument,
              "no launcher variables found: set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, "
              "or start the job with chorusrun, torchrun, srun or mpirun");
}

LaunchInfo read_launch_env() {
  return read_launch_env([](const char* name) -> const char* { return std::getenv(name); });
}

std::string host_identity() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) name[0] = '\0';
  std::string identity = name;
  std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (boot_id && std::getline(boot_id, id)) {
    auto first = id.find_first_not_of(" \t\r\n");
    auto last = id.find_last_not_of(" \t\r\n");
    if (first != std::string::npos) identity.append("/").append(id, first, last - first + 1);
  }
  return identity;
}

}  // namespace chorus
