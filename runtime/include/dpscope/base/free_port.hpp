// A TCP port on 127.0.0.1 for a rendezvous that a moment later binds it (`dpscope launch`'s
// MASTER_PORT for lesson 14's real PyTorch run; the tests' stores and launches).
#pragma once

namespace dpscope {

// A port nobody listens on now, drawn at random below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range, 32768-60999 by default), where the kernel never hands out the
// local port of an outgoing connection. A port that bind(port 0) returns lies inside that range, so
// any process's connect() on the machine (another test, a build's download) could take it before the
// rendezvous binds it: "Address already in use". Falls back to bind(port 0) when no port below the
// range is free. The caller still reports a bind that fails (two callers may draw the same port).
int free_loopback_port();

// The same, drawn from [lowest, highest] (64 draws), then from bind(port 0).
int free_loopback_port_between(int lowest, int highest);

}  // namespace dpscope
