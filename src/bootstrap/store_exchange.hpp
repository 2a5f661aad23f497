// Collective exchanges through the store whose cost per rank does not grow with the number
// of ranks. The store serves one request at a time, so a start-up in which every rank reads
// every other rank's key makes n² requests, and at hundreds of ranks waits for them.
//
// All-gather: each member sets its own key; the group's leader (its first member) waits for
// them all, reads them and publishes one value holding every member's; the others read that
// one value. A member makes 2 requests, the leader n + 3: about 3n in all.
// Barrier: a counter that every member adds 1 to; the member that brings it to the group's
// size sets a key that the others get. 2 requests per member.
//
// Store keys (inside the caller's namespace): "<key>/<rank>" per member and
// "<key>/all/<leader>" (all-gather); "<key>/count" and "<key>/done" (barrier). A key names one
// exchange: every use takes a new one.
#pragma once

#include "bootstrap/store.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace chorus {

/// Every member's `mine`, in the order of `members` (the same list on every member, without
/// repeats; `rank` is one of them). Throws Timeout naming the keys of the members that did
/// not arrive by `deadline`.
std::vector<std::string> store_all_gather(Store& store, const std::string& key,
                                          const std::vector<int>& members, int rank,
                                          const std::string& mine, Deadline deadline);

/// Returns once all `members` ranks called it with `key`. Throws Timeout at `deadline`.
void store_barrier(Store& store, const std::string& key, int members, Deadline deadline);

/// Length-prefixed fields ("<n>:<bytes>"): any byte may appear in a field.
void append_field(std::string& out, std::string_view field);
/// Reads the field at `*cursor` and moves the cursor past it; false when malformed.
bool read_field(const std::string& text, std::size_t* cursor, std::string* field);

}  // namespace chorus
