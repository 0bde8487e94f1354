#include "dpscope/base/free_port.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

namespace dpscope {
namespace {

bool binds(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// Holds 127.0.0.1:port, listening, while it lives.
class Listener {
 public:
  explicit Listener(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << port;
    EXPECT_EQ(::listen(fd_, 1), 0);
  }
  ~Listener() { ::close(fd_); }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

 private:
  int fd_;
};

// The port lies below the kernel's ephemeral range, where no outgoing connection is given one, and
// it can be bound right away.
TEST(FreePort, IsBelowTheEphemeralRangeAndFree) {
  int low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;
  ASSERT_GT(low, 10001) << "this machine's ephemeral range starts too low to draw below it";
  for (int i = 0; i < 20; ++i) {
    const int port = free_loopback_port();
    EXPECT_GE(port, 10000);
    EXPECT_LT(port, low);
    EXPECT_TRUE(binds(port)) << port;
  }
}

// A port someone listens on is never drawn: of two ports, the one held is skipped every time; with
// both held the port comes from the kernel's own range instead.
TEST(FreePort, SkipsAPortThatIsHeld) {
  const int first = free_loopback_port();
  ASSERT_TRUE(binds(first + 1)) << "pick another pair";
  Listener held(first);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(free_loopback_port_between(first, first + 1), first + 1);
  Listener also(first + 1);
  const int elsewhere = free_loopback_port_between(first, first + 1);
  EXPECT_NE(elsewhere, first);
  EXPECT_NE(elsewhere, first + 1);
  EXPECT_TRUE(binds(elsewhere));
}

}  // namespace
}  // namespace dpscope
