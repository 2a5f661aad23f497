// The store server's data and the meaning of each request, apart from the
// networking: execute() answers a request now or says it must wait.
#pragma once

#include "bootstrap/store_protocol.hpp"

#include <optional>
#include <string>
#include <unordered_map>

namespace chorus {

class StoreTable {
 public:
  /// The reply frame for `request`, or nullopt when it is a Get/Wait whose keys
  /// are not all present yet (retry with answer_if_ready after later changes).
  std::optional<std::string> execute(const store_wire::Request& request);
  /// For a parked Get/Wait: its Ok reply once every key exists, else nullopt.
  std::optional<std::string> answer_if_ready(const store_wire::Request& request) const;
  /// For a parked Get/Wait whose time ran out: the Timeout reply naming the missing keys.
  std::string timeout_reply(const store_wire::Request& request) const;
  /// A key of `keys` that does not exist, or null when all do.
  const std::string* first_missing(const std::vector<std::string>& keys) const;
  /// True when the last execute() added or changed a key (parked requests may now finish).
  bool changed() const { return changed_; }

 private:
  std::string add(const std::string& key, std::int64_t delta);
  bool contains_all(const std::vector<std::string>& keys) const;

  std::unordered_map<std::string, std::string> values_;
  bool changed_ = false;
};

}  // namespace chorus
