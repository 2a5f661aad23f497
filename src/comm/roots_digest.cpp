#include "comm/roots_digest.hpp"

#include <algorithm>

namespace chorus::detail {

void RootsDigest::close(Fingerprint& fp) {
  std::uint64_t h = sum_;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;  // SplitMix64's finaliser
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  fp.root = static_cast<std::int32_t>((h ^ (h >> 31)) & 0x7fffffff);  // never -1
  {
    std::lock_guard lock(mutex_);
    barriers_.emplace_back(fp.seq, calls_);
    if (barriers_.size() > kBarriersKept) barriers_.pop_front();
  }
  sum_ = 0;
  calls_.count = 0;
}

std::string RootsDigest::calls_before(std::uint64_t barrier_seq) const {
  std::lock_guard lock(mutex_);
  for (const auto& [seq, calls] : barriers_) {
    if (seq != barrier_seq) continue;
    std::string text;
    for (std::size_t i = 0; i < std::min(calls.count, kCallsKept); ++i) {
      text += (i == 0 ? "" : ", ") + describe(calls.first[i]);
    }
    if (calls.count > kCallsKept) {
      text += " and " + std::to_string(calls.count - kCallsKept) + " more";
    }
    return text;
  }
  return "";
}

}  // namespace chorus::detail
