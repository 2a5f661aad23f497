// Semantics of store requests (see store_protocol.hpp for the reply bodies).
#include "bootstrap/store_table.hpp"

#include <charconv>
#include <limits>

namespace chorus {

using store_wire::Op;
using store_wire::ReplyCode;

namespace {

std::string ok(std::string_view body = {}) { return store_wire::encode_reply(ReplyCode::Ok, body); }

std::string invalid(const std::string& sentence) {
  std::string body;
  store_wire::put_string(&body, sentence);
  return store_wire::encode_reply(ReplyCode::Invalid, body);
}

/// Parses a whole decimal int64 ("-12"); false on anything else.
bool parse_int64(const std::string& text, std::int64_t* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end && !text.empty();
}

bool add_overflows(std::int64_t a, std::int64_t b) {
  std::int64_t ignored;
  return __builtin_add_overflow(a, b, &ignored);
}

}  // namespace

std::optional<std::string> StoreTable::execute(const store_wire::Request& request) {
  changed_ = false;
  static const std::string kNoKey;
  const std::string& key = request.keys.empty() ? kNoKey : request.keys.front();
  switch (request.op) {
    case Op::Set:
      values_[key] = request.value;
      changed_ = true;
      return ok();
    case Op::Add:
      return add(key, request.delta);
    case Op::Get:
    case Op::Wait:
      return answer_if_ready(request);
    case Op::Check:
      return ok(std::string(1, contains_all(request.keys) ? '\1' : '\0'));
    case Op::Erase:
      return ok(std::string(1, values_.erase(key) > 0 ? '\1' : '\0'));
  }
  return invalid("unknown store operation");
}

std::string StoreTable::add(const std::string& key, std::int64_t delta) {
  // Counters are stored as decimal text (like torch's TCPStore), so get() reads them too.
  std::int64_t current = 0;
  auto it = values_.find(key);
  if (it != values_.end() && !parse_int64(it->second, &current)) {
    return invalid("store key '" + key + "' holds a value that is not an integer");
  }
  if (add_overflows(current, delta)) {
    return invalid("adding " + std::to_string(delta) + " to store key '" + key + "' overflows");
  }
  current += delta;
  values_[key] = std::to_string(current);
  changed_ = true;
  std::string body;
  store_wire::put_i64(&body, current);
  return ok(body);
}

bool StoreTable::contains_all(const std::vector<std::string>& keys) const {
  return first_missing(keys) == nullptr;
}

const std::string* StoreTable::first_missing(const std::vector<std::string>& keys) const {
  for (const auto& key : keys) {
    if (!values_.count(key)) return &key;
  }
  return nullptr;
}

std::optional<std::string> StoreTable::answer_if_ready(const store_wire::Request& request) const {
  if (!contains_all(request.keys)) return std::nullopt;
  if (request.op == Op::Get) return ok(values_.at(request.keys.front()));
  return ok();
}

std::string StoreTable::timeout_reply(const store_wire::Request& request) const {
  std::vector<std::string> missing;
  for (const auto& key : request.keys) {
    if (!values_.count(key)) missing.push_back(key);
  }
  return store_wire::encode_reply(ReplyCode::Timeout, store_wire::encode_keys(missing));
}

}  // namespace chorus
