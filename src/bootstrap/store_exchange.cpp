// Store exchanges; see store_exchange.hpp.
#include "bootstrap/store_exchange.hpp"

#include <chorus/error.hpp>

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

std::vector<std::string> store_all_gather(Store& store, const std::string& key,
                                          const std::vector<int>& members, int rank,
                                          const std::string& mine, Deadline deadline) {
  require_argument(!members.empty(), "store_all_gather needs at least one member");
  const std::string all_key = key + "/all/" + std::to_string(members.front());
  store.set(member_key(key, rank), mine);
  if (rank == members.front()) {
    const std::vector<std::string> keys = member_keys(key, members);
    store.wait(keys, deadline);  // names every missing member when some never come
    std::vector<std::string> values;
    std::string all;
    for (const std::string& k : keys) {
      values.push_back(store.get(k, deadline));
      append_field(all, values.back());
    }
    store.set(all_key, all);
    return values;
  }
  std::string all;
  try {
    all = store.get(all_key, deadline);
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
