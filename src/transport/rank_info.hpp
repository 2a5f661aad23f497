// What every rank publishes in the store during the mesh rendezvous, and the
// Topology derived from it.
#pragma once

#include "core/topology.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::transport {

struct RankInfo {
  std::string host;      ///< host_identity(): equal for ranks on one machine
  std::int64_t pid = 0;  ///< for the shared-memory liveness check
  std::string address;   ///< TCP listen address ("" when not listening)
  std::uint16_t port = 0;
  std::string token;  ///< random hex; names this rank's shared-memory inbox
};

/// The store all-gather of the records (bootstrap/store_exchange.hpp), inside the
/// communicator's namespace; rank `rank`'s own record is at rank_info_key(rank).
std::string rank_info_prefix();
std::string rank_info_key(int rank);

/// Length-prefixed fields ("<n>:<bytes>" five times): any byte may appear in a field.
std::string encode(const RankInfo& info);
/// Throws Error(RemoteError) naming `rank` when `text` is not a record.
RankInfo decode_rank_info(const std::string& text, int rank);

/// Host index per rank, numbered by first appearance in rank order.
Topology topology_of(const std::vector<RankInfo>& infos);

/// 32 random hex characters (auth::random_hex).
std::string random_token();

}  // namespace chorus::transport
