#include "comm/roots_digest.hpp"

namespace chorus::detail {

void RootsDigest::stamp(Fingerprint& fp) {
  if (has_root(fp.collective)) {
    std::uint64_t h =
        static_cast<std::uint32_t>(digest_) ^ (fp.seq << 32) ^ static_cast<std::uint32_t>(fp.root);
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;  // SplitMix64's finaliser
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    digest_ = static_cast<std::int32_t>((h ^ (h >> 31)) & 0x7fffffff);
    if (count_++ < kCallsKept) calls_ += (calls_.empty() ? "" : ", ") + describe(fp);
    return;
  }
  if (fp.collective != Collective::Barrier || digest_ == -1) return;
  fp.root = digest_;
  if (count_ > kCallsKept) calls_ += " and " + std::to_string(count_ - kCallsKept) + " more";
  {
    std::lock_guard lock(mutex_);
    barriers_.emplace_back(fp.seq, std::move(calls_));
    if (barriers_.size() > kBarriersKept) barriers_.pop_front();
  }
  digest_ = -1;
  calls_.clear();
  count_ = 0;
}

std::string RootsDigest::calls_before(std::uint64_t barrier_seq) const {
  std::lock_guard lock(mutex_);
  for (const auto& [seq, calls] : barriers_) {
    if (seq == barrier_seq) return calls;
  }
  return "";
}

}  // namespace chorus::detail
