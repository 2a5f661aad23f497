// Collective exchanges through the store whose cost per rank does not grow with the number
// of ranks. The store serves one request at a time, so a start-up in which every rank reads
// every other rank's key makes n² requests, and at hundreds of ranks waits for them.
//
// All-gather: a tree of gatherers with fan-in kGatherFanIn over the members in list order.
// Each member sets its own key. The leader of a block of kGatherFanIn^(l+1) consecutive members
// (its first) waits for and reads the values of its kGatherFanIn child blocks of level l (level
// 0: the members' own keys) and sets its block's value, all of them in member order; the first
// member, leader of the whole list, sets one value holding every member's, which the others
// read. A member makes 2 requests, a leader up to kGatherFanIn + 1 more per level it leads: the
// first member O(kGatherFanIn log n) in all (n + 2 up to 16 members, 38 at 512, 57 at 16384).
// Barrier: a counter that every member adds 1 to; the member that brings it to the group's
// size sets a key that the others get. 2 requests per member.
//
// Store keys (inside the caller's namespace): "<key>/<rank>" per member, "<key>/<level>/<rank>"
// per block leader and "<key>/all/<leader>" (all-gather); "<key>/count" and "<key>/done" (barrier).
// A key names one exchange: every use takes a new one.
#pragma once

#include "bootstrap/store.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace chorus {

/// The all-gather tree's fan-in: children read by a block leader per level.
inline constexpr std::size_t kGatherFanIn = 16;

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
