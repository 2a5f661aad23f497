// Communicator lifetime: init (store + transport rendezvous), split, abort, destroy.
#include "algorithms/selection.hpp"
#include "bootstrap/interfaces.hpp"
#include "bootstrap/launch_env.hpp"
#include "bootstrap/socket.hpp"
#include "comm/comm_state.hpp"
#include "comm/flight_recorder_dump.hpp"
#include "core/log.hpp"
#include "transport/mesh.hpp"

#include <chorus/communicator.hpp>

#include <algorithm>
#include <cstdlib>
#include <numeric>

namespace chorus {
namespace detail {

CommState::~CommState() {
  if (executor) executor->drain_and_stop();
  arena.reset();  // unmaps the shared windows; it asks the transport about liveness
  transport.reset();
  for (void* p : plain_shared) std::free(p);
}

}  // namespace detail

namespace {

using detail::CommState;

std::unique_ptr<detail::FlightRecorder> make_recorder(const detail::TraceSettings& trace,
                                                      const std::string& job, int world_rank,
                                                      const std::string& trace_name, int rank,
                                                      int size) {
  detail::TraceIdentity identity{job, world_rank, trace_name, rank, size};
  return std::make_unique<detail::FlightRecorder>(trace.buffer, std::move(identity));
}

/// `name` is the store namespace (unique in the job), `trace_name` the flight recorder's;
/// `shm_sized_for`: transport::MeshOptions::shm_sized_for (a split's parent's host ranks).
std::shared_ptr<CommState> connect_comm(const Config& config, int rank, int size,
                                        const std::string& name, const std::string& trace_name,
                                        std::shared_ptr<Store> store,
                                        std::shared_ptr<StoreServer> server,
                                        const std::string& trace_job, int world_rank,
                                        int shm_sized_for = 0) {
  const detail::TraceSettings trace = detail::read_trace_settings();
  auto state = std::make_shared<CommState>();
  state->trace_job = trace_job;
  state->world_rank = world_rank;
  state->rank = rank;
  state->size = size;
  state->config = config;
  state->algorithm_overrides = algorithms::parse_algorithm_override(config.algo);
  state->name = name;
  state->trace_name = trace_name;
  state->store = store;
  state->server = std::move(server);
  state->send_seq.assign(size, 0);
  state->recv_seq.assign(size, 0);
  auto scoped = make_prefix_store(store, name);
  transport::MeshOptions options;
  options.kind = transport::parse_kind(config.transport);
  options.secret = config.auth_token;
  options.advertise_host = config.socket_ifname;
  options.deadline = deadline_after(config.timeout);
  options.shm_sized_for = shm_sized_for;
  transport::Connection connection = transport::connect_mesh(*scoped, rank, size, options);
  state->transport = std::move(connection.transport);
  state->arena = std::move(connection.arena);
  state->selection.machine.nranks = size;
  state->selection.machine.topology = state->transport->topology();
  state->selection.machine.local_shm = options.kind != transport::Kind::Tcp;
  state->selection.parameters = algorithms::load_tuning_file(config.tuning_file);
  state->executor = detail::Executor::create(
      [raw = state.get()](Status status, const std::string& message) {
        raw->record_error(message);
        raw->transport->abort(status, message);
      },
      state->transport.get(), make_recorder(trace, trace_job, world_rank, trace_name, rank, size));
  if (trace.buffer > 0) detail::register_trace_source(state->executor, trace);
  return state;
}

/// The CHORUS_* configuration with the caller's overrides. CHORUS_TRANSPORT and
/// CHORUS_ALGO are parsed (and so checked) once per communicator, in connect_comm.
Config config_for(const InitOptions& options) {
  Config config = read_config();
  if (options.auth_token) config.auth_token = *options.auth_token;
  if (options.transport) config.transport = *options.transport;
  if (options.timeout) config.timeout = *options.timeout;
  return config;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

void check_shape(int nranks, int rank) {
  require_argument(nranks >= 1, "nranks must be at least 1, got " + std::to_string(nranks));
  require_argument(rank >= 0 && rank < nranks, "rank " + std::to_string(rank) + " is outside [0, " +
                                                   std::to_string(nranks) + ")");
}

/// A split's name goes into file names: short, and only characters every file system keeps.
void check_label(std::string_view label) {
  const bool plain = std::all_of(label.begin(), label.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
  require_argument(plain && label.size() <= 32,
                   "communicator name \"" + std::string(label) +
                       "\" must be at most 32 letters, digits, '_' or '-'");
}

}  // namespace

Communicator Communicator::init(const InitOptions& options) {
  check_shape(options.nranks, options.rank);
  require_argument(options.restart >= 0, std::string("InitOptions::restart is ")
                                             .append(std::to_string(options.restart))
                                             .append("; expected 0 or more"));
  net::HostPort address = net::parse_host_port(options.store_address);
  const Config config = config_for(options);
  set_log_rank(options.rank);
  // A CHORUS_SOCKET_IFNAME that fits no local interface fails here, on every rank, at once.
  if (!config.socket_ifname.empty()) net::advertised_address(config.socket_ifname);
  const Deadline deadline = deadline_after(config.timeout);
  std::shared_ptr<StoreServer> server;
  if (options.host_store && options.rank == 0) {
    require_argument(
        address.port != 0 || options.nranks == 1,
        "store address " + options.store_address + ": port 0 only works for a single rank");
    server = std::make_shared<StoreServer>(is_loopback(address.host) ? address.host : "0.0.0.0",
                                           address.port, config.auth_token);
    address.port = server->port();
  } else {
    require_argument(address.port != 0, "store address " + options.store_address + " has port 0");
  }
  std::shared_ptr<Store> store =
      connect_store(address.host, address.port, config.auth_token, deadline);
  // Each rank counts its own inits, so the n-th init of every rank shares a namespace
  // even when one store outlives several jobs' worth of communicators.
  // A restarted job (InitOptions::restart) counts in a namespace of its own.
  const std::string attempt =
      options.restart > 0 ? std::string("r").append(std::to_string(options.restart)).append("/")
                          : std::string();
  std::int64_t generation = store->add("chorus/init/" + attempt + std::to_string(options.rank), 1);
  std::string name = "chorus/" + attempt + "g" + std::to_string(generation) + "/world";
  return Communicator(connect_comm(
      config, options.rank, options.nranks, name, detail::trace_comm_name(name), store, server,
      detail::trace_job_id(config.auth_token, address.port, name), options.rank));
}

Communicator Communicator::init_from_env() {
  LaunchInfo info = read_launch_env();
  InitOptions options;
  options.nranks = info.world_size;
  options.rank = info.rank;
  options.store_address = info.master_addr + ":" + std::to_string(info.master_port);
  options.host_store = !env_flag("CHORUS_STORE_EXTERNAL", false);
  options.restart = info.restart;
  return init(options);
}

int Communicator::rank() const {
  if (!state_) throw Error(Status::InvalidUsage, "empty communicator handle");
  return state_->rank;
}

int Communicator::size() const {
  if (!state_) throw Error(Status::InvalidUsage, "empty communicator handle");
  return state_->size;
}

Communicator Communicator::split(int color, int key) { return split(color, key, ""); }

Communicator Communicator::split(int color, int key, std::string_view label) {
  if (!state_) throw Error(Status::InvalidUsage, "empty communicator handle");
  check_label(label);
  CommState& s = *state_;
  std::vector<std::int32_t> mine = {color, key};
  std::vector<std::int32_t> all(2 * static_cast<std::size_t>(s.size));
  all_gather(mine.data(), all.data(), 2, DataType::Int32);
  std::uint64_t split_id;
  {
    std::lock_guard lock(s.issue_mutex);
    split_id = ++s.split_seq;
  }
  if (color < 0) return Communicator();
  std::vector<int> members;
  for (int r = 0; r < s.size; ++r) {
    if (all[2 * r] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
  int new_rank =
      static_cast<int>(std::find(members.begin(), members.end(), s.rank) - members.begin());
  const std::string suffix = "split" + std::to_string(split_id) + "/color" + std::to_string(color);
  std::string trace_name = s.trace_name + "." + detail::trace_comm_name(suffix);
  if (!label.empty()) trace_name.append(".").append(label);
  try {
    const Topology& topology = s.transport->topology();
    const int parent_host_ranks = topology.ranks_on_host(topology.host_of_rank[s.rank]);
    return Communicator(connect_comm(s.config, new_rank, static_cast<int>(members.size()),
                                     s.name + "/" + suffix, trace_name, s.store, s.server,
                                     s.trace_job, s.world_rank, parent_host_ranks));
  } catch (const Error& e) {
    s.record_error(e.what());
    throw;
  }
}

void Communicator::abort() {
  if (!state_) return;
  state_->aborted = true;
  state_->record_error("the communicator was aborted by the application");
  state_->transport->abort(Status::InvalidUsage, "the communicator was aborted by the application");
}

std::string Communicator::name() const {
  if (!state_) throw Error(Status::InvalidUsage, "empty communicator handle");
  return state_->trace_name;
}

std::string Communicator::last_error() const {
  if (!state_) return "";
  std::lock_guard lock(state_->error_mutex);
  return state_->last_error;
}

std::string Communicator::last_algorithm() const {
  if (!state_) return "";
  std::lock_guard lock(state_->error_mutex);
  return std::string(state_->last_algorithm);
}

}  // namespace chorus
