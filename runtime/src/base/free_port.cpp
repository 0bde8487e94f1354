#include "dpscope/base/free_port.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>

namespace dpscope {
namespace {

constexpr int kLowestPort = 10000;  // clear of the well-known and most registered services' ports

// Binds 127.0.0.1:`port` (0: any) and returns the port bound, or 0 when it cannot be bound.
int try_bind(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  int bound = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    bound = ntohs(addr.sin_port);
  ::close(fd);
  return bound;
}

// The first port of the kernel's ephemeral range (32768 when it cannot be read).
int ephemeral_low() {
  int low = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  if (!(range >> low) || low < 1 || low > 65535) low = 32768;
  return low;
}

}  // namespace

int free_loopback_port_between(int lowest, int highest) {
  if (lowest >= 1 && highest <= 65535 && lowest <= highest) {
    static thread_local std::mt19937 gen(std::random_device{}() ^ static_cast<unsigned>(::getpid()));
    std::uniform_int_distribution<int> pick(lowest, highest);
    for (int attempt = 0; attempt < 64; ++attempt)
      if (const int port = try_bind(pick(gen)); port != 0) return port;
  }
  const int any = try_bind(0);
  return any != 0 ? any : 29500;
}

int free_loopback_port() { return free_loopback_port_between(kLowestPort, ephemeral_low() - 1); }

}  // namespace dpscope
