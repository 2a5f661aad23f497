// A Store that forwards to another and counts the requests made through it: the mesh
// rendezvous logs its count at INFO, and start-up tests check that a rank's requests do not
// grow with the number of ranks.
#pragma once

#include "bootstrap/store.hpp"

#include <string>
#include <vector>

namespace chorus {

class CountingStore final : public Store {
 public:
  /// `base` must outlive this store.
  explicit CountingStore(Store& base) : base_(base) {}
  void set(const std::string& k, const std::string& v) override { count(), base_.set(k, v); }
  std::string get(const std::string& k, Deadline d) override { return count(), base_.get(k, d); }
  std::int64_t add(const std::string& k, std::int64_t x) override {
    return count(), base_.add(k, x);
  }
  void wait(const std::vector<std::string>& k, Deadline d) override { count(), base_.wait(k, d); }
  bool check(const std::vector<std::string>& k) override { return count(), base_.check(k); }
  bool erase(const std::string& k) override { return count(), base_.erase(k); }
  int requests() const { return requests_; }

 private:
  void count() { ++requests_; }
  Store& base_;
  int requests_ = 0;
};

}  // namespace chorus
