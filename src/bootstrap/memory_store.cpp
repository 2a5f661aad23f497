// An in-process Store for threads-as-ranks runs and tests (make_memory_store).
// Same meaning as the TCP store: add() keeps decimal text, waits have deadlines.
#include "bootstrap/store.hpp"

#include <chorus/error.hpp>

#include <charconv>
#include <condition_variable>
#include <mutex>
#include <unordered_map>

namespace chorus {
namespace {

class MemoryStore final : public Store {
 public:
  void set(const std::string& key, const std::string& value) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      values_[key] = value;
    }
    changed_.notify_all();
  }

  std::string get(const std::string& key, Deadline deadline) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!changed_.wait_until(lock, deadline, [&] { return values_.count(key) > 0; })) {
      throw Error(Status::Timeout, "timed out waiting for store key '" + key + "'");
    }
    return values_.at(key);
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    std::int64_t result = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = values_.find(key);
      if (it != values_.end()) {
        const std::string& text = it->second;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), result);
        require_argument(ec == std::errc() && end == text.data() + text.size() && !text.empty(),
                         "store key '" + key + "' holds a value that is not an integer");
      }
      require_argument(!__builtin_add_overflow(result, delta, &result),
                       "adding " + std::to_string(delta) + " to store key '" + key + "' overflows");
      values_[key] = std::to_string(result);
    }
    changed_.notify_all();
    return result;
  }

  void wait(const std::vector<std::string>& keys, Deadline deadline) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!changed_.wait_until(lock, deadline, [&] { return contains_all(keys); })) {
      std::string missing;
      for (const auto& key : keys) {
        if (!values_.count(key)) missing += (missing.empty() ? "'" : ", '") + key + "'";
      }
      throw Error(Status::Timeout, "timed out waiting for store keys " + missing);
    }
  }

  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return contains_all(keys);
  }

  bool erase(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return values_.erase(key) > 0;
  }

 private:
  bool contains_all(const std::vector<std::string>& keys) const {
    for (const auto& key : keys) {
      if (!values_.count(key)) return false;
    }
    return true;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::unordered_map<std::string, std::string> values_;
};

}  // namespace

std::unique_ptr<Store> make_memory_store() { return std::make_unique<MemoryStore>(); }

}  // namespace chorus
