// Store (comm/store.hpp) on every store: InMemoryStore (rank threads) and TCPStore (processes; here
// a server and a client in one process, as rank 0 and another rank): set/get/add/compare_set/
// wait/check/delete, the exact timeout and misuse messages, atomicity of add under 8 threads.
// TCPStore's own failures (a port in use, no server, a server that goes away) follow.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/store.hpp"
#include "dpscope/comm/tcp_store.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

using std::chrono::steady_clock;
using ::testing::HasSubstr;

using testing::error_of;
using testing::Outcome;

// A store as two ranks see it: writer() (rank 0: InMemoryStore, or the TCPStore hosting the
// server) and reader() (the same InMemoryStore, or a second TCPStore connected to it).
class Stores : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    owned_ = make(Store::kDefaultTimeout);
    if (GetParam() == "tcp") {
      auto& server = static_cast<TCPStore&>(*owned_);
      other_ = std::make_unique<TCPStore>("127.0.0.1", server.port(), false, Milliseconds(5000));
    }
  }
  // A fresh store of this kind (a TCPStore with its own server on a free port).
  std::unique_ptr<Store> make(Milliseconds timeout) const {
    if (GetParam() == "tcp") return std::make_unique<TCPStore>("127.0.0.1", 0, true, timeout);
    return std::make_unique<InMemoryStore>(timeout);
  }
  Store& writer() { return *owned_; }
  Store& reader() { return other_ ? *other_ : *owned_; }

 private:
  std::unique_ptr<Store> owned_;
  std::unique_ptr<Store> other_;
};

TEST_P(Stores, SetThenGetReturnsTheBytesAndOverwritesReplace) {
  Store& store = writer();
  store.set("a", StoreBytes{0, 255, 7});
  EXPECT_EQ(store.get("a"), (StoreBytes{0, 255, 7}));
  store.set("a", "text");
  EXPECT_EQ(store.get_string("a"), "text");
  EXPECT_EQ(store.num_keys(), 1);
}

TEST_P(Stores, GetWaitsForAKeyAnotherThreadSetsLater) {
  Store& store = writer();
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    store.set("late", "here");
  });
  EXPECT_EQ(reader().get_string("late", Milliseconds(5000)), "here");  // another rank's view
  setter.join();
}

TEST_P(Stores, GetOfAMissingKeyTimesOutNamingTheKeyAndTheTimeWaited) {
  Store& store = writer();
  const auto begun = steady_clock::now();
  const Outcome e = error_of([&] { store.get("never", Milliseconds(50)); });
  const auto waited = std::chrono::duration_cast<Milliseconds>(steady_clock::now() - begun);
  EXPECT_EQ(e.kind, ErrorKind::kTimeout);
  EXPECT_EQ(e.message, store.name() + " get('never'): timed out after 50 ms waiting for the key to be set");
  EXPECT_GE(waited.count(), 50);
  EXPECT_LT(waited.count(), 2000);
}

TEST_P(Stores, ZeroTimeoutMeansTheStoresOwn) {
  std::unique_ptr<Store> owned = make(Milliseconds(40));
  Store& store = *owned;
  EXPECT_EQ(store.timeout(), Milliseconds(40));
  EXPECT_EQ(error_of([&] { store.get("x"); }).message,
            store.name() + " get('x'): timed out after 40 ms waiting for the key to be set");
  EXPECT_EQ(error_of([] { InMemoryStore bad(Milliseconds(0)); }).message,
            "store timeout must be positive, got 0 ms");
}

TEST_P(Stores, AddCountsFromZeroAndStoresDecimalText) {
  Store& store = writer();
  EXPECT_EQ(store.add("n", 5), 5);
  EXPECT_EQ(store.add("n", -7), -2);
  EXPECT_EQ(store.add("n", 0), -2);
  EXPECT_EQ(store.get_string("n"), "-2");
  store.set("word", "abc");
  const Outcome e = error_of([&] { store.add("word", 1); });
  EXPECT_EQ(e.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(e.message,
            store.name() + " add('word', 1): the key holds a value that is not an integer counter");
  EXPECT_EQ(store.get_string("word"), "abc");
}

TEST_P(Stores, ConcurrentAddsFromEightThreadsLoseNothing) {
  Store& store = writer();
  constexpr int kThreads = 8, kAddsEach = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAddsEach; ++i) store.add("counter", t + 1);
    });
  for (auto& t : threads) t.join();
  // sum over t of (t + 1) * 1000 = 36 * 1000
  EXPECT_EQ(store.add("counter", 0), 36000);
}

TEST_P(Stores, CompareSetSwapsOnlyWhenTheCurrentValueIsExpected) {
  Store& store = writer();
  // A missing key counts as empty: expected {} creates it.
  EXPECT_EQ(store.compare_set("k", {}, to_store_bytes("one")), to_store_bytes("one"));
  EXPECT_EQ(store.compare_set("k", to_store_bytes("zero"), to_store_bytes("two")), to_store_bytes("one"));
  EXPECT_EQ(store.compare_set("k", to_store_bytes("one"), to_store_bytes("two")), to_store_bytes("two"));
  EXPECT_EQ(store.get_string("k"), "two");
  EXPECT_EQ(store.compare_set("missing", to_store_bytes("x"), to_store_bytes("y")), StoreBytes{});
  EXPECT_FALSE(store.check({"missing"}));
}

TEST_P(Stores, WaitReturnsOnceEveryKeyExists) {
  Store& store = writer();
  store.set("a", "1");
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    store.add("b", 1);
  });
  reader().wait({"a", "b"}, Milliseconds(5000));
  setter.join();
  EXPECT_TRUE(store.check({"a", "b"}));
  store.wait({});  // nothing to wait for
}

TEST_P(Stores, WaitTimesOutNamingOnlyTheMissingKeys) {
  Store& store = writer();
  store.set("b", "present");
  const Outcome e = error_of([&] { store.wait({"a", "b", "c"}, Milliseconds(30)); });
  EXPECT_EQ(e.kind, ErrorKind::kTimeout);
  EXPECT_EQ(e.message, store.name() + " wait: timed out after 30 ms; keys never set: ['a', 'c']");
}

TEST_P(Stores, CheckAndDeleteKey) {
  Store& store = writer();
  store.set("a", "");
  EXPECT_TRUE(store.check({"a"}));  // an empty value is still a value
  EXPECT_FALSE(store.check({"a", "b"}));
  EXPECT_TRUE(store.delete_key("a"));
  EXPECT_FALSE(store.delete_key("a"));
  EXPECT_EQ(store.num_keys(), 0);
}

TEST_P(Stores, EmptyKeysAreRefused) {
  Store& store = writer();
  const Outcome e = error_of([&] { store.set("", "x"); });
  EXPECT_EQ(e.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(e.message, store.name() + " set: the key is empty");
  EXPECT_EQ(error_of([&] { store.wait({"a", ""}); }).message, store.name() + " wait: the key is empty");
}

INSTANTIATE_TEST_SUITE_P(Kinds, Stores, ::testing::Values("in_memory", "tcp"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(TcpStore, AClientSeesWhatAnotherProcessWouldSetIncludingLargeValues) {
  TCPStore server("127.0.0.1", 0, true, Milliseconds(5000));
  TCPStore client("localhost", server.port(), false, Milliseconds(5000));
  StoreBytes big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 31);
  client.set("nccl/id", big);
  EXPECT_EQ(server.get("nccl/id"), big);
  EXPECT_EQ(server.num_keys(), 1);
  EXPECT_EQ(client.name(), fmt::format("TCPStore(localhost:{})", server.port()));
}

TEST(TcpStore, ManyClientsAddingAtOnceLoseNothing) {
  TCPStore server("127.0.0.1", 0, true, Milliseconds(5000));
  std::vector<std::thread> ranks;
  for (int r = 0; r < 8; ++r)
    ranks.emplace_back([&] {
      TCPStore mine("127.0.0.1", server.port(), false, Milliseconds(5000));
      for (int i = 0; i < 100; ++i) mine.add("arrived", 1);
    });
  for (auto& t : ranks) t.join();
  EXPECT_EQ(server.add("arrived", 0), 800);
}

TEST(TcpStore, APortInUseIsOneLineNamingIt) {
  TCPStore first("127.0.0.1", 0, true, Milliseconds(5000));
  const Outcome e = error_of([&] { TCPStore second("127.0.0.1", first.port(), true, Milliseconds(500)); });
  EXPECT_EQ(e.kind, ErrorKind::kIo);
  EXPECT_EQ(e.message,
            fmt::format("TCPStore(127.0.0.1:{0}): cannot listen on port {0}: Address already in use "
                        "(another run uses it? pick another MASTER_PORT)",
                        first.port()));
}

TEST(TcpStore, NoServerWithinTheTimeoutIsATimeoutNamingTheReason) {
  uint16_t port = 0;
  {
    TCPStore gone("127.0.0.1", 0, true, Milliseconds(5000));  // a port that was free a moment ago
    port = gone.port();
  }
  const auto begun = steady_clock::now();
  const Outcome e = error_of([&] { TCPStore lonely("127.0.0.1", port, false, Milliseconds(200)); });
  const auto waited = std::chrono::duration_cast<Milliseconds>(steady_clock::now() - begun).count();
  EXPECT_EQ(e.kind, ErrorKind::kTimeout);
  EXPECT_EQ(
      e.message,
      fmt::format("TCPStore(127.0.0.1:{}): cannot reach the store within 200 ms: Connection refused", port));
  EXPECT_GE(waited, 200);
  EXPECT_LT(waited, 3000);
  EXPECT_THAT(
      error_of([] { TCPStore nowhere("no-such-host.invalid", 29500, false, Milliseconds(200)); }).message,
      HasSubstr("TCPStore(no-such-host.invalid:29500): cannot resolve host 'no-such-host.invalid'"));
}

TEST(TcpStore, AServerThatGoesAwayEndsAWaitingClientsGetAtOnce) {
  auto server = std::make_unique<TCPStore>("127.0.0.1", 0, true, Milliseconds(60000));
  TCPStore client("127.0.0.1", server->port(), false, Milliseconds(60000));
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    server.reset();  // rank 0's process ends
  });
  const auto begun = steady_clock::now();
  const Outcome e = error_of([&] { client.get("never"); });
  stopper.join();
  const auto waited = std::chrono::duration_cast<Milliseconds>(steady_clock::now() - begun).count();
  EXPECT_LT(waited, 5000);  // not the 60 s timeout
  // The server answers that it stopped (it used to answer "timed out after 60000 ms" at once), or
  // the connection closes first.
  EXPECT_TRUE(e.kind == ErrorKind::kProcess || e.kind == ErrorKind::kIo) << e.message;
  if (e.kind == ErrorKind::kProcess) {
    EXPECT_THAT(e.message, HasSubstr("the store's server stopped while this rank waited for 'never'"));
  }
  const Outcome after = error_of([&] { client.set("k", "v"); });
  EXPECT_EQ(after.kind, ErrorKind::kIo);
  EXPECT_THAT(after.message, HasSubstr("the store's server closed the connection (did its process end?)"));
}

// A program that is no store listens on the port: it accepts one connection, reads the request,
// answers `reply` and keeps the connection open until `hold_ms` pass (0: it closes at once).
class ForeignProgram {
 public:
  ForeignProgram(std::string reply, int hold_ms) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(::listen(listen_fd_, 1), 0);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this, reply, hold_ms] {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      char request[256];
      [[maybe_unused]] const ssize_t got = ::recv(fd, request, sizeof(request), 0);
      [[maybe_unused]] const ssize_t sent = ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
      ::close(fd);
    });
  }
  ~ForeignProgram() {
    thread_.join();
    ::close(listen_fd_);
  }
  uint16_t port() const { return port_; }

 private:
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

long peak_rss_kb() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

// A web server on MASTER_PORT answers "HTTP/1.1 400 ..." (read as a 1.35 GB message) and keeps the
// connection: the error once said "the store's server closed the connection (did its process
// end?)", which sent the user looking at rank 0 instead of at the port.
TEST(TcpStore, AnotherProgramOnThePortIsNamedAsNoStore) {
  ForeignProgram web("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", 2000);
  TCPStore client("127.0.0.1", web.port(), false, Milliseconds(1000));
  const auto begun = steady_clock::now();
  const Outcome e = error_of([&] { client.set("k", "v"); });
  EXPECT_LT(std::chrono::duration_cast<Milliseconds>(steady_clock::now() - begun).count(), 1500);
  EXPECT_EQ(e.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(e.message, fmt::format("TCPStore(127.0.0.1:{0}): what answers there is not a dpscope store (its "
                                   "reply is no store message; does another program listen on port {0}? "
                                   "pick another MASTER_PORT)",
                                   web.port()));
}

// An ssh server's "SSH-" reads as a 759,718,739-byte message: the client allocated all of it before
// reading a byte of it. The buffer now grows with what arrives.
TEST(TcpStore, AForeignReplyCostsNoMoreMemoryThanItSends) {
  const long before_kb = peak_rss_kb();
  {
    ForeignProgram ssh("SSH-2.0-OpenSSH_9.2p1\r\n", 0);
    TCPStore client("127.0.0.1", ssh.port(), false, Milliseconds(1000));
    const Outcome e = error_of([&] { client.set("k", "v"); });
    EXPECT_EQ(e.kind, ErrorKind::kIo);
    EXPECT_THAT(e.message, HasSubstr("the store's server closed the connection"));
  }
  EXPECT_LT(peak_rss_kb() - before_kb, 64 * 1024) << "KB more at the peak";
}

}  // namespace
}  // namespace dpscope
