// chorusrun: starts the ranks of a Chorus job on this node (see options.cpp's
// usage text for the contract).
#include <chorus/error.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "agreement.hpp"
#include "bootstrap/auth.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "job.hpp"
#include "launcher.hpp"
#include "options.hpp"
#include "output.hpp"
#include "signals.hpp"
#include "spawn.hpp"

namespace chorus::run {
namespace {

constexpr int kUsageExit = 2;
constexpr int kNotFoundExit = 127;

int usage_error(const std::string& sentence) {
  std::fprintf(stderr, "chorusrun: %s\nTry 'chorusrun --help'.\n", sentence.c_str());
  return kUsageExit;
}

// The job's secret: CHORUS_AUTH_TOKEN when set (required with several nodes,
// which must all use the same one), else a fresh random one.
std::string job_secret(const Options& options) {
  const char* token = std::getenv("CHORUS_AUTH_TOKEN");
  if (token && *token) return token;
  if (options.nnodes > 1) {
    throw Error(Status::InvalidArgument,
                "--nnodes > 1 needs CHORUS_AUTH_TOKEN set to the same secret on every node");
  }
  return auth::random_secret();
}

// Starts the store on node 0. Its thread is created with the launcher's signals
// blocked, so only the main thread ever runs their handlers.
std::unique_ptr<StoreServer> host_store(const std::string& host, int port,
                                        const std::string& secret) {
  sigset_t handled, saved;
  sigemptyset(&handled);
  for (int number : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&handled, number);
  pthread_sigmask(SIG_BLOCK, &handled, &saved);
  try {
    auto server = std::make_unique<StoreServer>(host, static_cast<std::uint16_t>(port), secret);
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    return server;
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    throw;
  }
}

// A port that is free on every interface of this host now (MASTER_PORT of a
// single-node job without --master-port). Rank 0 binds it later, as under torchrun.
int free_port() { return net::local_port(net::listen_tcp("", 0)); }

std::string restart_line(int restart, const Options& options) {
  return std::string("restarting the job (restart ")
      .append(std::to_string(restart))
      .append(" of ")
      .append(std::to_string(options.max_restarts))
      .append(")");
}

// One node, or several without --max-restarts: this node's ranks, restarted by themselves.
int run_alone(const Options& options, const JobContact& contact, const Program& program,
              SignalPipe& signals, std::optional<Deadline> deadline) {
  for (int restart = 0;; ++restart) {
    JobPlan plan = make_job_plan(options, contact, program, restart);
    plan.deadline = deadline;
    const JobResult result = run_job(plan, signals);
    if (result.end != RunEnd::RankFailed || restart >= options.max_restarts) {
      return result.exit_code;
    }
    say(restart_line(restart + 1, options));
  }
}

// Several nodes with --max-restarts: the launchers agree on every restart (agreement.hpp).
int run_agreed(const Options& options, const JobContact& contact, const Program& program,
               SignalPipe& signals, std::optional<Deadline> deadline) {
  NodeAgreement agreement(
      {contact.master_addr, contact.store_port, contact.secret, options.nnodes, options.node_rank,
       options.max_restarts, silence_limit_from_env(), deadline},
      signals);
  if (std::optional<int> exit_code = agreement.connect()) return *exit_code;
  for (int restart = 0;; ++restart) {
    if (std::optional<int> exit_code = agreement.join_round(restart)) return *exit_code;
    JobPlan plan = make_job_plan(options, contact, program, restart);
    plan.deadline = deadline;
    plan.peers = &agreement;
    const RoundEnd end = agreement.end_round(run_job(plan, signals));
    if (!end.restart) return end.exit_code;
    say(restart_line(restart + 1, options) + " on all " + std::to_string(options.nnodes) +
        " nodes: " + end.failure);
  }
}

int launch(const Options& options) {
  std::string secret;
  Program program;
  try {
    secret = job_secret(options);
  } catch (const Error& error) {
    return usage_error(error.what());
  }
  try {
    program = resolve_command(options.command);
  } catch (const Error& error) {
    std::fprintf(stderr, "chorusrun: %s\n", error.what());
    return kNotFoundExit;
  }
  SignalPipe signals;
  JobContact contact{options.master_addr.empty() ? "127.0.0.1" : options.master_addr,
                     options.master_port, store_port_of(options), secret};
  std::unique_ptr<StoreServer> store;
  if (options.node_rank == 0) {
    store = host_store(contact.master_addr, contact.store_port, secret);
    contact.store_port = store->port();
  }
  // Picked while the store holds its port, so the two differ.
  if (contact.master_port == 0) contact.master_port = free_port();
  std::optional<Deadline> deadline;
  if (options.timeout_seconds > 0) {
    deadline = deadline_after(
        std::chrono::milliseconds(static_cast<long long>(options.timeout_seconds * 1000)));
  }
  if (options.nnodes > 1 && options.max_restarts > 0) {
    return run_agreed(options, contact, program, signals, deadline);
  }
  return run_alone(options, contact, program, signals, deadline);
}

}  // namespace
}  // namespace chorus::run

int main(int argc, char** argv) {
  using namespace chorus::run;
  Options options;
  try {
    options = parse_options(argc, argv);
  } catch (const chorus::Error& error) {
    return usage_error(error.what());
  }
  if (options.help) {
    std::fputs(usage_text().c_str(), stdout);
    return 0;
  }
  if (options.version) {
    std::puts("chorusrun " CHORUS_VERSION);
    return 0;
  }
  try {
    return launch(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "chorusrun: %s\n", error.what());
    return 1;
  }
}
