// Bucket assignment for DistributedDataParallel: a pure function of the parameter sizes, so
// every rank computes the same buckets without communicating.
#include <chorus/error.hpp>
#include <chorus/train/ddp.hpp>

namespace chorus::train {

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& param_bytes,
                                                     std::size_t first_cap, std::size_t cap) {
  require_argument(first_cap > 0 && cap > 0, "assign_buckets: bucket caps must be positive");
  std::vector<std::vector<std::size_t>> buckets;
  std::vector<std::size_t> current;
  std::size_t filled = 0;
  // Backward produces gradients roughly in reverse registration order (last layer first), so
  // walking the parameters backwards fills the bucket whose gradients are ready first.
  for (std::size_t i = param_bytes.size(); i-- > 0;) {
    current.push_back(i);
    filled += param_bytes[i];
    const std::size_t limit = buckets.empty() ? first_cap : cap;
    if (filled >= limit) {
      buckets.push_back(std::move(current));
      current.clear();
      filled = 0;
    }
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

}  // namespace chorus::train
