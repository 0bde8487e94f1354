// TCPStore: the client side (comm/tcp_store.hpp); the server is tcp_store_server.cpp.
#include "dpscope/comm/tcp_store.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/ranges.h>

#include "dpscope/base/error.hpp"
#include "tcp_store_server.hpp"
#include "tcp_store_wire.hpp"

namespace dpscope {
namespace {

using detail::wire::Op;
using detail::wire::Reader;
using detail::wire::Status;
using detail::wire::Writer;

constexpr Milliseconds kRetryInterval{50};
constexpr int64_t kGraceMs = 10'000;  // beyond a request's own wait, for the server to answer

// One connection attempt to host:port; the socket, or -1 with `error` set (errno, or a resolver
// message in `resolver_error`).
int connect_once(const std::string& host, uint16_t port, int* error, std::string* resolver_error) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    *resolver_error = ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      *error = errno;
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

// Whole milliseconds left, rounded up: the server then waits at least as long as the caller asked
// (truncating let a 50 ms get give up after 49 ms on a fast machine).
int64_t ms_until(Store::Clock::time_point deadline) {
  return std::chrono::ceil<Milliseconds>(deadline - Store::Clock::now()).count();
}

}  // namespace

TCPStore::TCPStore(std::string host, uint16_t port, bool is_server, Milliseconds timeout)
    : Store(timeout), host_(std::move(host)), port_(port) {
  DPS_CHECK(!host_.empty(), ErrorKind::kInvalidArgument, "TCPStore: the host is empty");
  if (is_server) {
    server_ = std::make_unique<detail::TcpStoreServer>(port, name());
    port_ = server_->port();
  }
  const auto deadline = Clock::now() + timeout;
  int error = 0;
  std::string resolver_error;
  while (true) {
    fd_ = connect_once(host_, port_, &error, &resolver_error);
    if (fd_ >= 0) break;
    DPS_CHECK(resolver_error.empty(), ErrorKind::kInvalidArgument, "{}: cannot resolve host '{}': {}", name(),
              host_, resolver_error);
    DPS_CHECK(Clock::now() < deadline, ErrorKind::kTimeout, "{}: cannot reach the store within {} ms: {}",
              name(), timeout.count(), std::strerror(error));
    std::this_thread::sleep_for(kRetryInterval);  // the server's process may not be listening yet
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

TCPStore::~TCPStore() {
  if (fd_ >= 0) ::close(fd_);
  server_.reset();  // after this client's connection is gone
}

std::string TCPStore::name() const { return fmt::format("TCPStore({}:{})", host_, port_); }

StoreBytes TCPStore::call(const StoreBytes& request, int64_t wait_ms) {
  std::lock_guard lock(mutex_);
  const int64_t limit_ms = std::max<int64_t>(wait_ms, 0) + kGraceMs;
  timeval tv{.tv_sec = static_cast<time_t>(limit_ms / 1000),
             .tv_usec = static_cast<suseconds_t>(limit_ms % 1000 * 1000)};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  DPS_CHECK(detail::wire::send_message(fd_, request), ErrorKind::kIo,
            "{}: the store's server closed the connection (did its process end?)", name());
  bool timed_out = false;
  bool oversized = false;
  std::optional<StoreBytes> response = detail::wire::receive_message(fd_, &timed_out, &oversized);
  // Another program on the port (a web server, ssh) answers with bytes that are no store message: it
  // did not close the connection, and the hint is the port, not rank 0's process.
  DPS_CHECK(!oversized, ErrorKind::kInvalidArgument,
            "{}: what answers there is not a dpscope store (its reply is no store message; does another "
            "program listen on port {}? pick another MASTER_PORT)",
            name(), port_);
  DPS_CHECK(!timed_out, ErrorKind::kTimeout, "{}: the store's server did not answer within {} ms", name(),
            limit_ms);
  DPS_CHECK(response.has_value() && !response->empty(), ErrorKind::kIo,
            "{}: the store's server closed the connection (did its process end?)", name());
  return std::move(*response);
}

namespace {

// The status byte of a response, and a reader positioned after it.
Status status_of(const StoreBytes& response) { return static_cast<Status>(response[0]); }

// A waiting call the server ended by stopping: its process (rank 0's) is ending, usually because
// that rank failed; waiting on would only end in a timeout much later. Returns normally when the
// call's own deadline is (about) reached: the server stopped because rank 0 timed out at the same
// moment, and this call timed out too.
void check_not_closed(const StoreBytes& response, const std::string& store, const std::string& keys,
                      Store::Clock::time_point deadline) {
  constexpr Milliseconds kSameMoment{250};
  if (status_of(response) != Status::kClosed || Store::Clock::now() + kSameMoment >= deadline) return;
  throw Error(ErrorKind::kProcess,
              fmt::format("{}: the store's server stopped while this rank waited for '{}' (did rank 0 fail?)",
                          store, keys));
}

template <typename T>
T must(std::optional<T> value, const std::string& store) {
  DPS_CHECK(value.has_value(), ErrorKind::kIo, "{}: malformed response from the store's server", store);
  return std::move(*value);
}

}  // namespace

void TCPStore::do_set(const std::string& key, const StoreBytes& value) {
  call(Writer().u8(static_cast<uint8_t>(Op::kSet)).text(key).bytes(value).take(), 0);
}

std::optional<StoreBytes> TCPStore::do_get(const std::string& key, Clock::time_point deadline) {
  const int64_t ms = ms_until(deadline);
  const StoreBytes response = call(Writer().u8(static_cast<uint8_t>(Op::kGet)).text(key).i64(ms).take(), ms);
  check_not_closed(response, name(), key, deadline);
  if (status_of(response) == Status::kTimedOut || status_of(response) == Status::kClosed) return std::nullopt;
  Reader in(response);
  in.u8();
  return must(in.bytes(), name());
}

std::optional<int64_t> TCPStore::do_add(const std::string& key, int64_t delta) {
  const StoreBytes response =
      call(Writer().u8(static_cast<uint8_t>(Op::kAdd)).text(key).i64(delta).take(), 0);
  if (status_of(response) != Status::kOk) return std::nullopt;
  Reader in(response);
  in.u8();
  return must(in.i64(), name());
}

StoreBytes TCPStore::do_compare_set(const std::string& key, const StoreBytes& expected,
                                    const StoreBytes& desired) {
  const StoreBytes response = call(
      Writer().u8(static_cast<uint8_t>(Op::kCompareSet)).text(key).bytes(expected).bytes(desired).take(), 0);
  Reader in(response);
  in.u8();
  return must(in.bytes(), name());
}

std::vector<std::string> TCPStore::do_wait(const std::vector<std::string>& keys, Clock::time_point deadline) {
  const int64_t ms = ms_until(deadline);
  const StoreBytes response =
      call(Writer().u8(static_cast<uint8_t>(Op::kWait)).texts(keys).i64(ms).take(), ms);
  check_not_closed(response, name(), fmt::format("{}", fmt::join(keys, "', '")), deadline);
  if (status_of(response) == Status::kOk) return {};
  Reader in(response);  // timed out: the keys still missing follow
  in.u8();
  return must(in.texts(), name());
}

bool TCPStore::do_check(const std::vector<std::string>& keys) {
  const StoreBytes response = call(Writer().u8(static_cast<uint8_t>(Op::kCheck)).texts(keys).take(), 0);
  Reader in(response);
  in.u8();
  return must(in.u8(), name()) != 0;
}

bool TCPStore::do_delete(const std::string& key) {
  const StoreBytes response = call(Writer().u8(static_cast<uint8_t>(Op::kDelete)).text(key).take(), 0);
  Reader in(response);
  in.u8();
  return must(in.u8(), name()) != 0;
}

int64_t TCPStore::do_num_keys() {
  const StoreBytes response = call(Writer().u8(static_cast<uint8_t>(Op::kNumKeys)).take(), 0);
  Reader in(response);
  in.u8();
  return must(in.i64(), name());
}

}  // namespace dpscope
