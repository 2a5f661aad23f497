// The timeout sentence; see timeout_sentence.hpp.
#include "transport/timeout_sentence.hpp"

#include <cstdio>

namespace chorus::transport {
namespace {

std::string format_seconds(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

std::string timeout_sentence(const TimedOutWait& wait) {
  const std::string after = "timed out after " + format_seconds(wait.waited) + "s";
  const std::string waiting = "waiting for rank(s) " + wait.ranks + " (" + wait.what + ")";
  if (!wait.call) return after + " " + waiting;
  return describe(*wait.call) + " " + after + ": " +
         arrival_clause(wait.self, *wait.call, wait.last_seen) + "; " + waiting;
}

std::string arrival_clause(int self, const Fingerprint& call,
                           const std::vector<std::optional<Fingerprint>>& last_seen) {
  std::vector<int> missing;
  for (int p = 0; p < static_cast<int>(last_seen.size()); ++p) {
    if (p != self && (!last_seen[p] || last_seen[p]->seq < call.seq)) missing.push_back(p);
  }
  if (missing.empty()) return "every rank reached it";
  std::string ranks, where;
  for (int p : missing) {
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(p);
    where +=
        (where.empty() ? "rank " : "; rank ") + std::to_string(p) +
        (last_seen[p] ? " last seen in " + describe(*last_seen[p]) : " not seen in any call yet");
  }
  return (missing.size() == 1 ? "rank " : "ranks ") + ranks + " never reached it (" + where + ")";
}

void merge_sightings(std::vector<std::optional<Fingerprint>>& seen,
                     const std::vector<std::optional<Fingerprint>>& more) {
  if (seen.size() < more.size()) seen.resize(more.size());
  for (std::size_t p = 0; p < more.size(); ++p) {
    if (!more[p] || is_point_to_point(more[p]->collective)) continue;
    if (!seen[p] || seen[p]->seq < more[p]->seq) seen[p] = more[p];
  }
}

}  // namespace chorus::transport
