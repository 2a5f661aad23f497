// Launch plan construction (see job.hpp).
#include "job.hpp"

#include "core/cpus.hpp"

#include <unistd.h>

#include <map>

extern char** environ;

namespace chorus::run {
namespace {

using Variables = std::map<std::string, std::string>;

std::vector<std::string> merged_environment(const Variables& overrides) {
  std::vector<std::string> env;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string text = *entry;
    std::string name = text.substr(0, text.find('='));
    if (!overrides.contains(name)) env.push_back(std::move(text));
  }
  for (const auto& [name, value] : overrides) env.push_back(name + "=" + value);
  return env;
}

Variables rank_variables(const Options& options, const JobContact& contact, int local_rank,
                         int restart) {
  int world = options.nnodes * options.nproc_per_node;
  int rank = options.node_rank * options.nproc_per_node + local_rank;
  return Variables{
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(world)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node)},
      {"GROUP_RANK", std::to_string(options.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(options.nnodes)},
      {"MASTER_ADDR", contact.master_addr},
      {"MASTER_PORT", std::to_string(contact.master_port)},
      {"CHORUS_STORE_ADDR", contact.master_addr},
      {"CHORUS_STORE_PORT", std::to_string(contact.store_port)},
      {"CHORUS_AUTH_TOKEN", contact.secret},
      {"CHORUS_STORE_EXTERNAL", "1"},
      {"CHORUS_RESTART_COUNT", std::to_string(restart)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(restart)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(options.max_restarts)},
  };
}

}  // namespace

JobPlan make_job_plan(const Options& options, const JobContact& contact, const Program& program,
                      int restart) {
  JobPlan plan;
  plan.tag_output = options.tag_output;
  plan.timeout_seconds = options.timeout_seconds;
  bool stdin_is_terminal = isatty(0) != 0;
  const std::vector<int> cpus = options.bind_to_core ? allowed_cpus() : std::vector<int>{};
  for (int local_rank = 0; local_rank < options.nproc_per_node; ++local_rank) {
    RankLaunch launch;
    launch.rank = options.node_rank * options.nproc_per_node + local_rank;
    launch.request.path = program.path;
    launch.request.argv = program.argv;
    launch.request.env = merged_environment(rank_variables(options, contact, local_rank, restart));
    launch.request.capture_output = options.tag_output;
    launch.request.inherit_stdin = local_rank == 0 && !stdin_is_terminal;
    if (!cpus.empty()) {
      launch.request.cpu = cpus[static_cast<std::size_t>(local_rank) % cpus.size()];
    }
    plan.ranks.push_back(std::move(launch));
  }
  return plan;
}

}  // namespace chorus::run
