// Bucket assignment: a pure function of the parameter sizes (and kinds), so every rank computes
// the same buckets without communicating.
#include <chorus/error.hpp>
#include <chorus/train/buckets.hpp>

#include <map>
#include <string>

namespace chorus::train {

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& param_bytes,
                                                     std::size_t first_cap, std::size_t cap) {
  return assign_buckets(param_bytes, std::vector<int>(param_bytes.size(), 0), first_cap, cap);
}

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& param_bytes,
                                                     const std::vector<int>& kinds,
                                                     std::size_t first_cap, std::size_t cap) {
  require_argument(first_cap > 0 && cap > 0, "assign_buckets: bucket caps must be positive");
  require_argument(kinds.size() == param_bytes.size(),
                   "assign_buckets: " + std::to_string(param_bytes.size()) + " sizes but " +
                       std::to_string(kinds.size()) + " kinds");
  struct Open {
    std::size_t bucket;  ///< index into `buckets`
    std::size_t filled;  ///< bytes in it
    bool first;          ///< the kind's first bucket (closes at first_cap)
  };
  std::vector<std::vector<std::size_t>> buckets;
  std::map<int, Open> open;
  std::map<int, bool> closed_one;  ///< kinds that already closed a bucket
  // Backward produces gradients roughly in reverse registration order (last layer first), so
  // walking the parameters backwards fills the bucket whose gradients are ready first.
  for (std::size_t i = param_bytes.size(); i-- > 0;) {
    auto it = open.find(kinds[i]);
    if (it == open.end()) {
      buckets.emplace_back();
      it = open.emplace(kinds[i], Open{buckets.size() - 1, 0, !closed_one[kinds[i]]}).first;
    }
    Open& o = it->second;
    buckets[o.bucket].push_back(i);
    o.filled += param_bytes[i];
    if (o.filled >= (o.first ? first_cap : cap)) {
      closed_one[kinds[i]] = true;
      open.erase(it);
    }
  }
  return buckets;
}

}  // namespace chorus::train
