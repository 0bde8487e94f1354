// The TCP store's server and the wire helpers (tcp_store_server.hpp, tcp_store_wire.hpp).
#include "tcp_store_server.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "dpscope/base/error.hpp"
#include "tcp_store_wire.hpp"

namespace dpscope::detail {

namespace wire {

bool send_message(int fd, const StoreBytes& message) {
  uint8_t header[4];
  const auto n = static_cast<uint32_t>(message.size());
  for (int i = 0; i < 4; ++i) header[i] = static_cast<uint8_t>(n >> (8 * i));
  auto send_all = [fd](const uint8_t* p, size_t left) {
    while (left > 0) {
      const ssize_t sent = ::send(fd, p, left, MSG_NOSIGNAL);
      if (sent < 0 && errno == EINTR) continue;
      if (sent <= 0) return false;
      p += sent;
      left -= static_cast<size_t>(sent);
    }
    return true;
  };
  return send_all(header, 4) && send_all(message.data(), message.size());
}

std::optional<StoreBytes> receive_message(int fd, bool* timed_out, bool* oversized) {
  if (timed_out != nullptr) *timed_out = false;
  if (oversized != nullptr) *oversized = false;
  auto receive_all = [&](uint8_t* p, size_t left) {
    while (left > 0) {
      const ssize_t got = ::recv(fd, p, left, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && timed_out != nullptr) *timed_out = true;
      if (got <= 0) return false;
      p += got;
      left -= static_cast<size_t>(got);
    }
    return true;
  };
  uint8_t header[4];
  if (!receive_all(header, 4)) return std::nullopt;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(header[i]) << (8 * i);
  if (n > kMaxMessageBytes) {
    if (oversized != nullptr) *oversized = true;
    return std::nullopt;
  }
  // The buffer grows with what arrives, 1 MiB at a time: a peer that is no store (ssh's "SSH-"
  // reads as 759,718,739 bytes) costs no more memory than it sends.
  constexpr size_t kChunkBytes = size_t{1} << 20;
  StoreBytes message;
  while (message.size() < n) {
    const size_t at = message.size();
    message.resize(at + std::min<size_t>(kChunkBytes, n - at));
    if (!receive_all(message.data() + at, message.size() - at)) return std::nullopt;
  }
  return message;
}

}  // namespace wire

namespace {

constexpr Milliseconds kServerTimeout{24LL * 3600 * 1000};  // clients bring their own deadlines

}  // namespace

TcpStoreServer::TcpStoreServer(uint16_t port, const std::string& store_name) : store_(kServerTimeout) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  DPS_CHECK(listen_fd_ >= 0, ErrorKind::kIo, "{}: cannot create a socket: {}", store_name,
            std::strerror(errno));
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(port);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listen_fd_, 128) != 0) {
    const int error = errno;
    ::close(listen_fd_);
    throw Error(ErrorKind::kIo,
                fmt::format("{}: cannot listen on port {}: {}{}", store_name, port, std::strerror(error),
                            error == EADDRINUSE ? " (another run uses it? pick another MASTER_PORT)" : ""));
  }
  socklen_t length = sizeof(address);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);  // accept() returns
  acceptor_.join();
  ::close(listen_fd_);
  store_.close();  // waiting get()s and wait()s answer at once
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(mutex_);
    // Reading ends (an idle connection's recv() returns), writing does not: a request being
    // answered still gets its answer (the set whose waiter just let rank 0's process end, say).
    for (int fd : client_fds_) ::shutdown(fd, SHUT_RD);
    workers.swap(workers_);
  }
  for (std::thread& t : workers) t.join();
}

void TcpStoreServer::accept_loop() {
  while (!stopping_) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shut down (or out of descriptors: clients then time out connecting, with a message)
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const timeval send_limit{.tv_sec = 10, .tv_usec = 0};  // a client that stops reading cannot hold us
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_limit, sizeof(send_limit));
    std::lock_guard lock(mutex_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    client_fds_.push_back(fd);
    workers_.emplace_back([this, fd] { serve(fd); });
  }
}

void TcpStoreServer::serve(int fd) {
  while (!stopping_) {
    const std::optional<StoreBytes> request = wire::receive_message(fd);
    if (!request) break;  // the client left (or sent garbage)
    const StoreBytes response = handle(*request);
    if (response.empty() || !wire::send_message(fd, response)) break;
  }
  std::lock_guard lock(mutex_);
  client_fds_.erase(std::remove(client_fds_.begin(), client_fds_.end(), fd), client_fds_.end());
  ::close(fd);
}

StoreBytes TcpStoreServer::handle(const StoreBytes& request) {
  using wire::Status;
  wire::Reader in(request);
  wire::Writer out;
  const std::optional<uint8_t> op = in.u8();
  if (!op) return {};
  auto ok = [&out]() -> wire::Writer& { return out.u8(static_cast<uint8_t>(Status::kOk)); };
  auto remaining = [](int64_t ms) { return Milliseconds(std::max<int64_t>(ms, 1)); };
  try {
    switch (static_cast<wire::Op>(*op)) {
      case wire::Op::kSet: {
        auto key = in.text();
        auto value = in.bytes();
        if (!key || !value) return {};
        store_.set(*key, *value);
        ok();
        break;
      }
      case wire::Op::kGet: {
        auto key = in.text();
        auto ms = in.i64();
        if (!key || !ms) return {};
        if (!store_.check({*key})) store_.wait({*key}, remaining(*ms));  // throws kTimeout
        ok().bytes(store_.get(*key, remaining(1)));
        break;
      }
      case wire::Op::kAdd: {
        auto key = in.text();
        auto delta = in.i64();
        if (!key || !delta) return {};
        ok().i64(store_.add(*key, *delta));  // throws kInvalidArgument for a non-counter
        break;
      }
      case wire::Op::kCompareSet: {
        auto key = in.text();
        auto expected = in.bytes();
        auto desired = in.bytes();
        if (!key || !expected || !desired) return {};
        ok().bytes(store_.compare_set(*key, *expected, *desired));
        break;
      }
      case wire::Op::kWait: {
        auto keys = in.texts();
        auto ms = in.i64();
        if (!keys || !ms) return {};
        try {
          store_.wait(*keys, remaining(*ms));
        } catch (const Error& e) {
          if (e.kind() != ErrorKind::kTimeout) throw;
          // Timed out, or ended by the server stopping: which keys are missing travels with the
          // answer (the client cannot ask again).
          std::vector<std::string> missing;
          for (const std::string& key : *keys)
            if (!store_.check({key})) missing.push_back(key);
          out.u8(static_cast<uint8_t>(stopping_ ? Status::kClosed : Status::kTimedOut)).texts(missing);
          return out.take();
        }
        ok();
        break;
      }
      case wire::Op::kCheck: {
        auto keys = in.texts();
        if (!keys) return {};
        ok().u8(store_.check(*keys) ? 1 : 0);
        break;
      }
      case wire::Op::kDelete: {
        auto key = in.text();
        if (!key) return {};
        ok().u8(store_.delete_key(*key) ? 1 : 0);
        break;
      }
      case wire::Op::kNumKeys: ok().i64(store_.num_keys()); break;
      default: return {};
    }
  } catch (const Error& e) {
    wire::Writer failed;
    // A wait the stopping server ended is no timeout: the caller says the server went away.
    if (stopping_ && e.kind() == ErrorKind::kTimeout)
      return failed.u8(static_cast<uint8_t>(Status::kClosed)).take();
    failed.u8(
        static_cast<uint8_t>(e.kind() == ErrorKind::kTimeout ? Status::kTimedOut : Status::kNotACounter));
    return failed.take();
  }
  return out.take();
}

}  // namespace dpscope::detail
