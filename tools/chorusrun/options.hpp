// Command line of chorusrun: how many ranks to start on this node, where the
// job's store lives, and the program every rank runs.
#pragma once

#include <string>
#include <vector>

namespace chorus::run {

struct Options {
  int nproc_per_node = 1;      ///< -n / --nproc-per-node / -np: ranks on this node
  int nnodes = 1;              ///< --nnodes
  int node_rank = 0;           ///< --node-rank: this node's index, < nnodes
  std::string master_addr;     ///< --master-addr: host of the store ("" = 127.0.0.1, single node)
  int master_port = 0;         ///< --master-port: port of the store (0 = pick a free one)
  bool tag_output = false;     ///< --tag-output: prefix every line with "[rank] "
  double timeout_seconds = 0;  ///< --timeout: stop the job after this long (0 = never)
  bool bind_to_core = false;   ///< --bind-to core: local rank i runs on the i-th allowed CPU (mod)
  bool help = false;           ///< -h / --help
  std::vector<std::string> command;  ///< the program and its arguments
};

/// Parses argv[1..argc). Options end at the first word that is not an option,
/// or after "--". Values may follow as the next word or after '=' (long
/// options) or directly (-n4). Throws Error(InvalidArgument) with a sentence
/// naming the bad option: a missing program, -n 0, a malformed number,
/// --node-rank >= --nnodes, or several nodes without --master-addr/--master-port.
Options parse_options(int argc, const char* const argv[]);

/// The --help text.
std::string usage_text();

}  // namespace chorus::run
