// The TCP store's server (comm/tcp_store.hpp): listens on a port, serves each client connection on
// its own thread against one InMemoryStore. Private to src/comm.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "dpscope/comm/store.hpp"

namespace dpscope::detail {

class TcpStoreServer {
 public:
  // Listens on every interface at `port` (0: a free one). Throws kIo naming `store_name` and the
  // OS's reason when it cannot.
  TcpStoreServer(uint16_t port, const std::string& store_name);
  // Stops accepting, wakes every waiting request (they answer "timed out"), closes the
  // connections and joins their threads.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  uint16_t port() const { return port_; }

 private:
  void accept_loop();
  void serve(int fd);
  // The response to one request ("" when the request is malformed: the connection is dropped).
  StoreBytes handle(const StoreBytes& request);

  InMemoryStore store_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;  // guards client_fds_ and workers_
  std::vector<int> client_fds_;
  std::vector<std::thread> workers_;
  std::thread acceptor_;
};

}  // namespace dpscope::detail
