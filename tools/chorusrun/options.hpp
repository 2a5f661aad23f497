// Command line of chorusrun: how many ranks to start on this node, where the
// job's store lives, and the program every rank runs.
#pragma once

#include <string>
#include <vector>

namespace chorus::run {

/// Long options also take torchrun's spellings: '_' for '-' (--nproc_per_node, --master_port).
struct Options {
  int nproc_per_node = 1;      ///< -n / --nproc-per-node / -np: ranks on this node
  int nnodes = 1;              ///< --nnodes
  int node_rank = 0;           ///< --node-rank: this node's index, < nnodes
  std::string master_addr;     ///< --master-addr: host of node 0 ("" = 127.0.0.1, single node)
  int master_port = 0;         ///< --master-port: the program's MASTER_PORT (0 = a free one)
  int store_port = 0;          ///< --store-port: the launcher's store (0 = see store_port_of)
  bool tag_output = false;     ///< --tag-output: prefix every line with "[rank] "
  double timeout_seconds = 0;  ///< --timeout: stop the job after this long (0 = never)
  bool bind_to_core = false;   ///< --bind-to core: local rank i runs on the i-th allowed CPU (mod)
  int max_restarts = 0;        ///< --max-restarts: restarts of the whole job after a rank failed
  bool help = false;           ///< -h / --help
  bool version = false;        ///< --version
  std::vector<std::string> command;  ///< the program and its arguments
};

/// Parses argv[1..argc). Options end at the first word that is not an option,
/// or after "--". Values may follow as the next word or after '=' (long
/// options) or directly (-n4). Throws Error(InvalidArgument) with a sentence
/// naming the bad option: a missing program, -n 0, a malformed number,
/// --node-rank >= --nnodes, several nodes without --master-addr/--master-port,
/// or the store's port equal to --master-port.
Options parse_options(int argc, const char* const argv[]);

/// The port of the launcher's store: --store-port; else, with several nodes,
/// --master-port + 1 (every node must know it); else 0 (node 0 picks a free one).
int store_port_of(const Options& options);

/// The --help text.
std::string usage_text();

}  // namespace chorus::run
