// Rendezvous records.
#include "transport/rank_info.hpp"

#include "bootstrap/auth.hpp"
#include "bootstrap/store_exchange.hpp"

#include <chorus/error.hpp>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>

namespace chorus::transport {
namespace {

constexpr int kFields = 5;

template <typename Integer>
bool parse_integer(const std::string& text, Integer* value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string rank_info_prefix() { return "transport/rank"; }
std::string rank_info_key(int rank) { return rank_info_prefix() + "/" + std::to_string(rank); }

std::string encode(const RankInfo& info) {
  std::string out;
  append_field(out, info.host);
  append_field(out, std::to_string(info.pid));
  append_field(out, info.address);
  append_field(out, std::to_string(info.port));
  append_field(out, info.token);
  return out;
}

RankInfo decode_rank_info(const std::string& text, int rank) {
  std::string fields[kFields];
  std::size_t cursor = 0;
  bool ok = true;
  for (auto& field : fields) ok = ok && read_field(text, &cursor, &field);
  RankInfo info;
  info.host = fields[0];
  info.address = fields[2];
  info.token = fields[4];
  ok = ok && cursor == text.size() && parse_integer(fields[1], &info.pid) &&
       parse_integer(fields[3], &info.port);
  if (!ok) {
    throw Error(Status::RemoteError,
                "the rendezvous record of rank " + std::to_string(rank) + " is malformed");
  }
  return info;
}

Topology topology_of(const std::vector<RankInfo>& infos) {
  Topology topology;
  std::map<std::string, int> index_of_host;
  for (const RankInfo& info : infos) {
    auto [it, inserted] = index_of_host.emplace(info.host, static_cast<int>(index_of_host.size()));
    topology.host_of_rank.push_back(it->second);
  }
  topology.num_hosts = static_cast<int>(index_of_host.size());
  return topology;
}

std::string random_token() { return auth::random_hex(16); }

}  // namespace chorus::transport
