// TCPStore: the Store processes meet through (c10d's TCPStore). One process — rank 0, at
// MASTER_ADDR:MASTER_PORT — hosts the server; every process, the host's included, is a client.
//
//   // rank 0                                          // every other rank
//   TCPStore store("10.0.0.1", 29500, /*is_server=*/true); TCPStore store("10.0.0.1", 29500, false);
//   store.set("nccl/id", id_bytes);                     auto id = store.get("nccl/id");  // waits
//
// Semantics are the Store's (comm/store.hpp): values are bytes, counters decimal text, every call
// bounded by its timeout (0: the store's). The server keeps the values in an InMemoryStore and
// serves each client connection on its own thread, so a client blocked in get() or wait() holds no
// one else up. Waiting happens on the server, against the client's deadline; the client's socket
// allows that long plus a grace period, so a server that dies mid-call is reported, never waited on.
//
// Errors, each one line naming the store ("TCPStore(10.0.0.1:29500)"):
//  * the server cannot listen: kIo with the OS's reason ("port 29500 is in use: Address already in
//    use"; pick another MASTER_PORT);
//  * no server answers within the timeout (a rank 0 that never starts): kTimeout, "cannot reach the
//    store within 30000 ms: Connection refused";
//  * the server goes away (its process ended): kIo, "the store's server closed the connection";
//  * an unknown host: kInvalidArgument.
//
// Wire format (version 1, both directions): a u32 length, then the message; integers little-endian;
// strings and byte values as u32 length + bytes. A request starts with a u8 op, a response with a u8
// status (0 ok, 1 timed out, 2 not a counter); a timed-out wait lists the keys still missing. Not an
// interface to other programs: only dpscope's own processes speak it.
//
// Stopping: when the server's owner goes (rank 0's process ends), waiting calls are answered
// "timed out" at once, a request being answered still gets its answer, and later calls fail with
// "the store's server closed the connection".
//
// Thread semantics: thread-safe. One object holds one connection; its calls are serialized (a get()
// waiting for a key delays other calls on the same object, not on other objects).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "dpscope/comm/store.hpp"

namespace dpscope {

namespace detail {
class TcpStoreServer;
}

class TCPStore final : public Store {
 public:
  // is_server: start the server on `port` (0: any free port, see port()) before connecting. Then
  // connects to host:port, retrying until `timeout` (the server may start later than this client).
  TCPStore(std::string host, uint16_t port, bool is_server, Milliseconds timeout = kDefaultTimeout);
  ~TCPStore() override;

  std::string name() const override;
  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  bool is_server() const { return server_ != nullptr; }

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
  // Sends one request and returns the response (status byte first); `wait_ms` is how long the
  // server may take (a get's or wait's remaining time).
  StoreBytes call(const StoreBytes& request, int64_t wait_ms);

  std::string host_;
  uint16_t port_ = 0;
  std::unique_ptr<detail::TcpStoreServer> server_;
  std::mutex mutex_;  // one request at a time on the connection
  int fd_ = -1;
};

}  // namespace dpscope
