// From chorusrun's options to the per-rank launch plan: global ranks and the
// environment every rank gets.
#pragma once

#include <string>

#include "launcher.hpp"
#include "options.hpp"

namespace chorus::run {

/// Where the ranks meet and how they prove they belong to the job. The launcher's
/// store and the program's own rendezvous (torch's env:// binds MASTER_PORT on
/// rank 0) listen on node 0's host on two different ports.
struct JobContact {
  std::string master_addr;  ///< node 0's host: MASTER_ADDR and CHORUS_STORE_ADDR
  int master_port = 0;      ///< MASTER_PORT, left free for the program
  int store_port = 0;       ///< CHORUS_STORE_PORT, the launcher's store
  std::string secret;
};

/// One RankLaunch per local rank: rank = node_rank * nproc_per_node + local_rank,
/// environment = this process's environment with RANK, WORLD_SIZE, LOCAL_RANK,
/// LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
/// CHORUS_STORE_ADDR, CHORUS_STORE_PORT, CHORUS_AUTH_TOKEN, CHORUS_STORE_EXTERNAL=1,
/// CHORUS_RESTART_COUNT and TORCHELASTIC_RESTART_COUNT (`restart`) and
/// TORCHELASTIC_MAX_RESTARTS replaced. Local rank 0 inherits stdin when stdin is not a
/// terminal. The plan's deadline is left to the caller (it spans restarts).
JobPlan make_job_plan(const Options& options, const JobContact& contact, const Program& program,
                      int restart);

}  // namespace chorus::run
