// The collective ledger; see include/chorus/train/ledger.hpp.
#include <chorus/train/ledger.hpp>

namespace chorus::train {

std::string_view to_string(CollectiveKind kind) noexcept {
  switch (kind) {
    case CollectiveKind::AllReduce:
      return "all_reduce";
    case CollectiveKind::AllGather:
      return "all_gather";
    case CollectiveKind::ReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::AllToAll:
      return "all_to_all";
    case CollectiveKind::AllToAllV:
      return "all_to_all_v";
    case CollectiveKind::Broadcast:
      return "broadcast";
    case CollectiveKind::Send:
      return "send";
    case CollectiveKind::Recv:
      return "recv";
  }
  return "?";
}

void CollectiveLedger::record(std::string_view group, CollectiveKind kind, std::size_t bytes) {
  if (!enabled()) return;
  std::lock_guard lock(mutex_);
  entries_.push_back({std::string(group), kind, bytes});
}

std::vector<LedgerEntry> CollectiveLedger::entries() const {
  std::lock_guard lock(mutex_);
  return entries_;
}

LedgerTotals CollectiveLedger::totals() const {
  LedgerTotals totals;
  for (const LedgerEntry& e : entries()) {
    LedgerTotal& t = totals[{e.group, e.kind}];
    ++t.calls;
    t.bytes += e.bytes;
  }
  return totals;
}

std::vector<LedgerEntry> CollectiveLedger::take() {
  std::lock_guard lock(mutex_);
  return std::exchange(entries_, {});
}

void CollectiveLedger::clear() { take(); }

std::string describe(const std::vector<LedgerEntry>& entries) {
  std::string out;
  for (const LedgerEntry& e : entries) {
    if (!out.empty()) out += "; ";
    out += e.group + " " + std::string(to_string(e.kind)) + " " + std::to_string(e.bytes) + " B";
  }
  return out.empty() ? "(none)" : out;
}

}  // namespace chorus::train
