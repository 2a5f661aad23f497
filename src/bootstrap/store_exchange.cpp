// Store exchanges; see store_exchange.hpp.
#include "bootstrap/store_exchange.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <charconv>

namespace chorus {
namespace {

std::string member_key(const std::string& key, int rank) {
  return key + "/" + std::to_string(rank);
}

std::vector<std::string> member_keys(const std::string& key, const std::vector<int>& members) {
  std::vector<std::string> keys;
  keys.reserve(members.size());
  for (int r : members) keys.push_back(member_key(key, r));
  return keys;
}

std::vector<std::string> decode_all(const std::string& text, std::size_t count,
                                    const std::string& key) {
  std::vector<std::string> values(count);
  std::size_t cursor = 0;
  bool ok = true;
  for (auto& value : values) ok = ok && read_field(text, &cursor, &value);
  if (!ok || cursor != text.size()) {
    throw Error(Status::RemoteError, "the gathered store value '" + key + "' is malformed");
  }
  return values;
}

}  // namespace

void append_field(std::string& out, std::string_view field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

bool read_field(const std::string& text, std::size_t* cursor, std::string* field) {
  std::size_t colon = text.find(':', *cursor);
  if (colon == std::string::npos) return false;
  std::size_t length = 0;
  auto [end, ec] = std::from_chars(text.data() + *cursor, text.data() + colon, length);
  if (ec != std::errc() || end != text.data() + colon || length > text.size() - colon - 1) {
    return false;
  }
  *field = text.substr(colon + 1, length);
  *cursor = colon + 1 + length;
  return true;
}

namespace {

/// Block leaders' values go to "<key>/<level>/<rank>"; level 0 is the members' own keys.
std::string block_key(const std::string& key, int level, int rank) {
  return level == 0 ? member_key(key, rank)
                    : key + "/" + std::to_string(level) + "/" + std::to_string(rank);
}

/// The gather of `members[index]`, a leader of blocks up to some level: its value after
/// reading its children block by block (see the header); "" for a member that leads none.
std::string gather_blocks(Store& store, const std::string& key, const std::vector<int>& members,
                          std::size_t index, const std::string& mine, Deadline deadline) {
  const std::size_t n = members.size();
  std::string gathered;
  append_field(gathered, mine);
  int level = 0;
  for (std::size_t span = 1; span < n && index % (span * kGatherFanIn) == 0; span *= kGatherFanIn) {
    std::vector<std::string> children;
    for (std::size_t c = index + span; c < std::min(n, index + span * kGatherFanIn); c += span) {
      children.push_back(block_key(key, level, members[c]));
    }
    store.wait(children, deadline);
    for (const std::string& child : children) {
      std::string value = store.get(child, deadline);
      if (level == 0) {
        append_field(gathered, value);
      } else {
        gathered += value;
      }
    }
    ++level;
    if (span * kGatherFanIn < n) store.set(block_key(key, level, members[index]), gathered);
  }
  return gathered;
}

}  // namespace

std::vector<std::string> store_all_gather(Store& store, const std::string& key,
                                          const std::vector<int>& members, int rank,
                                          const std::string& mine, Deadline deadline) {
  require_argument(!members.empty(), "store_all_gather needs at least one member");
  const std::string all_key = key + "/all/" + std::to_string(members.front());
  const auto index =
      static_cast<std::size_t>(std::find(members.begin(), members.end(), rank) - members.begin());
  require_argument(index < members.size(), "rank " + std::to_string(rank) +
                                               " is not a member of the all-gather '" + key + "'");
  std::string all;
  try {
    store.set(member_key(key, rank), mine);
    if (index == 0) {
      all = gather_blocks(store, key, members, index, mine, deadline);
      store.set(all_key, all);
    } else {
      gather_blocks(store, key, members, index, mine, deadline);
      all = store.get(all_key, deadline);
    }
  } catch (const Error& e) {
    if (e.status() != Status::Timeout) throw;
    store.wait(member_keys(key, members), Clock::now());  // names the members that are missing
    throw;
  }
  return decode_all(all, members.size(), all_key);
}

void store_barrier(Store& store, const std::string& key, int members, Deadline deadline) {
  if (store.add(key + "/count", 1) == members) {
    store.set(key + "/done", "");
    return;
  }
  try {
    store.get(key + "/done", deadline);
  } catch (const Error& e) {
    if (e.status() != Status::Timeout) throw;
    const std::int64_t arrived = store.add(key + "/count", 0);
    throw Error(Status::Timeout, "timed out at the rendezvous step '" + key +
                                     "': " + std::to_string(arrived) + " of " +
                                     std::to_string(members) + " ranks arrived");
  }
}

}  // namespace chorus
