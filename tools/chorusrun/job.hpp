// From chorusrun's options to the per-rank launch plan: global ranks and the
// environment every rank gets.
#pragma once

#include <string>

#include "launcher.hpp"
#include "options.hpp"

namespace chorus::run {

/// Where the ranks find the job's store and how they prove they belong to the job.
struct JobContact {
  std::string master_addr;
  int master_port = 0;
  std::string secret;
};

/// One RankLaunch per local rank: rank = node_rank * nproc_per_node + local_rank,
/// environment = this process's environment with RANK, WORLD_SIZE, LOCAL_RANK,
/// LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
/// CHORUS_AUTH_TOKEN and CHORUS_STORE_EXTERNAL=1 replaced. Local rank 0 inherits
/// stdin when stdin is not a terminal. `program_path` is the resolved executable.
JobPlan make_job_plan(const Options& options, const JobContact& contact,
                      const std::string& program_path);

}  // namespace chorus::run
