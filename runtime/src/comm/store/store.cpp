// Store: argument checks, timeouts and error messages shared by every store; InMemoryStore.
#include "dpscope/comm/store.hpp"

#include <charconv>

#include "dpscope/base/error.hpp"

namespace dpscope {
namespace {

std::string quoted_list(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& key : keys) out += (out.empty() ? "'" : ", '") + key + "'";
  return "[" + out + "]";
}

// The counter a value holds, if it is a decimal integer (c10d writes counters as text).
std::optional<int64_t> parse_counter(const StoreBytes& value) {
  const char* first = reinterpret_cast<const char*>(value.data());
  const char* last = first + value.size();
  int64_t parsed = 0;
  const auto [end, error] = std::from_chars(first, last, parsed);
  if (value.empty() || error != std::errc() || end != last) return std::nullopt;
  return parsed;
}

}  // namespace

StoreBytes to_store_bytes(std::string_view text) { return StoreBytes(text.begin(), text.end()); }

std::string to_string(const StoreBytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

Store::Store(Milliseconds timeout) : timeout_(timeout) {
  DPS_CHECK(timeout.count() > 0, ErrorKind::kInvalidArgument, "store timeout must be positive, got {} ms",
            timeout.count());
}

void Store::check_key(const std::string& key, const char* call) const {
  DPS_CHECK(!key.empty(), ErrorKind::kInvalidArgument, "{} {}: the key is empty", name(), call);
}

void Store::set(const std::string& key, const StoreBytes& value) {
  check_key(key, "set");
  do_set(key, value);
}

StoreBytes Store::get(const std::string& key, Milliseconds timeout) {
  check_key(key, "get");
  const Milliseconds limit = resolve(timeout);
  std::optional<StoreBytes> value = do_get(key, Clock::now() + limit);
  DPS_CHECK(value.has_value(), ErrorKind::kTimeout,
            "{} get('{}'): timed out after {} ms waiting for the key to be set", name(), key, limit.count());
  return *value;
}

int64_t Store::add(const std::string& key, int64_t delta) {
  check_key(key, "add");
  std::optional<int64_t> value = do_add(key, delta);
  DPS_CHECK(value.has_value(), ErrorKind::kInvalidArgument,
            "{} add('{}', {}): the key holds a value that is not an integer counter", name(), key, delta);
  return *value;
}

StoreBytes Store::compare_set(const std::string& key, const StoreBytes& expected, const StoreBytes& desired) {
  check_key(key, "compare_set");
  return do_compare_set(key, expected, desired);
}

void Store::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  for (const std::string& key : keys) check_key(key, "wait");
  const Milliseconds limit = resolve(timeout);
  const std::vector<std::string> missing = do_wait(keys, Clock::now() + limit);
  DPS_CHECK(missing.empty(), ErrorKind::kTimeout, "{} wait: timed out after {} ms; keys never set: {}",
            name(), limit.count(), quoted_list(missing));
}

bool Store::check(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) check_key(key, "check");
  return do_check(keys);
}

bool Store::delete_key(const std::string& key) {
  check_key(key, "delete_key");
  return do_delete(key);
}

int64_t Store::num_keys() { return do_num_keys(); }

// ---- InMemoryStore ----

void InMemoryStore::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  changed_.notify_all();
}

void InMemoryStore::do_set(const std::string& key, const StoreBytes& value) {
  {
    std::lock_guard lock(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
}

std::optional<StoreBytes> InMemoryStore::do_get(const std::string& key, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline, [&] { return closed_ || values_.count(key) > 0; });
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::optional<int64_t> InMemoryStore::do_add(const std::string& key, int64_t delta) {
  int64_t value = delta;
  {
    std::lock_guard lock(mutex_);
    auto it = values_.find(key);
    if (it != values_.end()) {
      std::optional<int64_t> current = parse_counter(it->second);
      if (!current) return std::nullopt;
      value = *current + delta;
    }
    values_[key] = to_store_bytes(std::to_string(value));
  }
  changed_.notify_all();
  return value;
}

StoreBytes InMemoryStore::do_compare_set(const std::string& key, const StoreBytes& expected,
                                         const StoreBytes& desired) {
  StoreBytes result;
  {
    std::lock_guard lock(mutex_);
    auto it = values_.find(key);
    const StoreBytes current = it == values_.end() ? StoreBytes{} : it->second;
    if (current != expected) return current;
    values_[key] = desired;
    result = desired;
  }
  changed_.notify_all();
  return result;
}

std::vector<std::string> InMemoryStore::missing_locked(const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const std::string& key : keys)
    if (values_.count(key) == 0) missing.push_back(key);
  return missing;
}

std::vector<std::string> InMemoryStore::do_wait(const std::vector<std::string>& keys,
                                                Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline, [&] { return closed_ || missing_locked(keys).empty(); });
  return missing_locked(keys);
}

bool InMemoryStore::do_check(const std::vector<std::string>& keys) {
  std::lock_guard lock(mutex_);
  return missing_locked(keys).empty();
}

bool InMemoryStore::do_delete(const std::string& key) {
  std::lock_guard lock(mutex_);
  return values_.erase(key) > 0;
}

int64_t InMemoryStore::do_num_keys() {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(values_.size());
}

}  // namespace dpscope
