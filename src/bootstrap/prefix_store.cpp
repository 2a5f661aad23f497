// A namespaced view of another store (make_prefix_store).
#include "bootstrap/store.hpp"

namespace chorus {
namespace {

/// Forwards every call to `base` with each key written as prefix + "/" + key.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix)
      : base_(std::move(base)), prefix_(std::move(prefix) + "/") {}

  void set(const std::string& key, const std::string& value) override {
    base_->set(full(key), value);
  }
  std::string get(const std::string& key, Deadline deadline) override {
    return base_->get(full(key), deadline);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return base_->add(full(key), delta);
  }
  void wait(const std::vector<std::string>& keys, Deadline deadline) override {
    base_->wait(full(keys), deadline);
  }
  bool check(const std::vector<std::string>& keys) override { return base_->check(full(keys)); }
  bool erase(const std::string& key) override { return base_->erase(full(key)); }

 private:
  std::string full(const std::string& key) const { return prefix_ + key; }
  std::vector<std::string> full(const std::vector<std::string>& keys) const {
    std::vector<std::string> result;
    result.reserve(keys.size());
    for (const auto& key : keys) result.push_back(full(key));
    return result;
  }

  std::shared_ptr<Store> base_;
  std::string prefix_;
};

}  // namespace

std::unique_ptr<Store> make_prefix_store(std::shared_ptr<Store> base, const std::string& prefix) {
  return std::make_unique<PrefixStore>(std::move(base), prefix);
}

}  // namespace chorus
