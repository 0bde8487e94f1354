// Store: the small key-value service ranks meet through (c10d's Store), and InMemoryStore.
//
//   auto store = std::make_shared<InMemoryStore>();
//   store->set("config", "mlp 784-512-10");            // any bytes; strings for convenience
//   store->add("arrived", 1);                           // atomic counter, returns the new value
//   store->wait({"rank/0", "rank/1"});                  // until every key exists, or kTimeout
//   std::string id = store->get_string("nccl/id");      // waits for the key, or kTimeout
//
// Used by init_process_group (comm/process_group.hpp: every rank announces itself and waits for
// the others), spawn() (one InMemoryStore for its rank threads) and TCPStore (comm/tcp_store.hpp),
// where processes meet: `dpscope launch`'s MASTER_ADDR:MASTER_PORT.
//
// The interface is process-agnostic: values are bytes, counters are their decimal text (like
// c10d, so `get` on a counter returns "3"), and every call may block at most its timeout. A
// timeout of 0 means the store's own (Store::timeout(), c10d's default of 300 s unless given).
// Waiting calls (get, wait) end in kTimeout naming the key(s) and the time waited; a TCP store
// will bound its round trips by the same timeout.
//
// Thread semantics: every member function of every Store is thread-safe; one store object is
// shared by all the rank threads of a process (std::shared_ptr<Store>).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dpscope/comm/types.hpp"

namespace dpscope {

using StoreBytes = std::vector<std::uint8_t>;

StoreBytes to_store_bytes(std::string_view text);
std::string to_string(const StoreBytes& bytes);

class Store {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Milliseconds kDefaultTimeout{300000};  // c10d's default store timeout

  // Throws kInvalidArgument for a timeout that is not positive.
  explicit Store(Milliseconds timeout = kDefaultTimeout);
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  Milliseconds timeout() const { return timeout_; }
  // "InMemoryStore", "TCPStore(host:port)": the prefix of every error message of this store.
  virtual std::string name() const = 0;

  // Sets (or overwrites) `key` and wakes every rank waiting for it.
  void set(const std::string& key, const StoreBytes& value);
  void set(const std::string& key, std::string_view value) { set(key, to_store_bytes(value)); }
  // The value of `key`, waiting until some rank sets it; kTimeout after `timeout`.
  StoreBytes get(const std::string& key, Milliseconds timeout = Milliseconds(0));
  std::string get_string(const std::string& key, Milliseconds timeout = Milliseconds(0)) {
    return to_string(get(key, timeout));
  }
  // Atomically adds `delta` to the counter `key` (a missing key counts as 0) and returns the new
  // value. kInvalidArgument if the key holds something other than a decimal integer.
  int64_t add(const std::string& key, int64_t delta);
  // Atomically: if the value of `key` (empty when the key is missing) equals `expected`, sets it to
  // `desired`. Returns the value the key holds afterwards (empty when it is still missing).
  StoreBytes compare_set(const std::string& key, const StoreBytes& expected, const StoreBytes& desired);
  // Returns once every key exists; kTimeout after `timeout`, naming the keys still missing.
  void wait(const std::vector<std::string>& keys, Milliseconds timeout = Milliseconds(0));
  // Whether every key exists now (never waits).
  bool check(const std::vector<std::string>& keys);
  // Removes `key`; returns whether it existed.
  bool delete_key(const std::string& key);
  int64_t num_keys();

 protected:
  // What a store implements. Keys arrive non-empty; deadlines are absolute.
  virtual void do_set(const std::string& key, const StoreBytes& value) = 0;
  // nullopt: the deadline passed before the key was set.
  virtual std::optional<StoreBytes> do_get(const std::string& key, Clock::time_point deadline) = 0;
  // nullopt: the key holds something that is not a decimal integer (the value is left as is).
  virtual std::optional<int64_t> do_add(const std::string& key, int64_t delta) = 0;
  virtual StoreBytes do_compare_set(const std::string& key, const StoreBytes& expected,
                                    const StoreBytes& desired) = 0;
  // The keys still missing when the call returns: empty once all exist, else the deadline passed.
  virtual std::vector<std::string> do_wait(const std::vector<std::string>& keys,
                                           Clock::time_point deadline) = 0;
  virtual bool do_check(const std::vector<std::string>& keys) = 0;
  virtual bool do_delete(const std::string& key) = 0;
  virtual int64_t do_num_keys() = 0;

 private:
  Milliseconds resolve(Milliseconds timeout) const { return timeout.count() > 0 ? timeout : timeout_; }
  void check_key(const std::string& key, const char* call) const;

  Milliseconds timeout_;
};

// A Store for the rank threads of one process: a map under a mutex, waiters on a condition
// variable. Nothing is persisted; the store lives as long as its last shared_ptr.
class InMemoryStore final : public Store {
 public:
  explicit InMemoryStore(Milliseconds timeout = kDefaultTimeout) : Store(timeout) {}
  std::string name() const override { return "InMemoryStore"; }
  // Wakes every waiting get() and wait(), which then end as if their deadline had passed, and makes
  // later ones end at once: how the TCP store's server stops without waiting out its clients'
  // timeouts. Values stay readable.
  void close();

 protected:
  void do_set(const std::string& key, const StoreBytes& value) override;
  std::optional<StoreBytes> do_get(const std::string& key, Clock::time_point deadline) override;
  std::optional<int64_t> do_add(const std::string& key, int64_t delta) override;
  StoreBytes do_compare_set(const std::string& key, const StoreBytes& expected,
                            const StoreBytes& desired) override;
  std::vector<std::string> do_wait(const std::vector<std::string>& keys, Clock::time_point deadline) override;
  bool do_check(const std::vector<std::string>& keys) override;
  bool do_delete(const std::string& key) override;
  int64_t do_num_keys() override;

 private:
  std::vector<std::string> missing_locked(const std::vector<std::string>& keys) const;

  std::mutex mutex_;
  std::condition_variable changed_;  // notified on every set, add and successful compare_set, and close
  std::map<std::string, StoreBytes> values_;
  bool closed_ = false;
};

}  // namespace dpscope
