// The TCP store's wire format (comm/tcp_store.hpp): message framing and the encoding of its fields,
// shared by the client (tcp_store.cpp) and the server (tcp_store_server.cpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "dpscope/comm/store.hpp"

namespace dpscope::detail::wire {

enum class Op : uint8_t { kSet = 1, kGet, kAdd, kCompareSet, kWait, kCheck, kDelete, kNumKeys };
// kClosed: the server stopped (its process is ending) while the request waited for a key.
enum class Status : uint8_t { kOk = 0, kTimedOut = 1, kNotACounter = 2, kClosed = 3 };

inline constexpr uint32_t kMaxMessageBytes = 1u << 30;  // 1 GiB: a sane bound on one value

// Appends fields to a message under construction.
class Writer {
 public:
  Writer& u8(uint8_t v) {
    bytes_.push_back(v);
    return *this;
  }
  Writer& u32(uint32_t v) { return raw(v); }
  Writer& i64(int64_t v) { return raw(static_cast<uint64_t>(v)); }
  Writer& blob(const void* data, size_t n) {
    u32(static_cast<uint32_t>(n));
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
    return *this;
  }
  Writer& text(const std::string& s) { return blob(s.data(), s.size()); }
  Writer& bytes(const StoreBytes& b) { return blob(b.data(), b.size()); }
  Writer& texts(const std::vector<std::string>& list) {
    u32(static_cast<uint32_t>(list.size()));
    for (const std::string& s : list) text(s);
    return *this;
  }
  StoreBytes take() { return std::move(bytes_); }

 private:
  template <typename T>
  Writer& raw(T v) {
    for (size_t i = 0; i < sizeof(T); ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  StoreBytes bytes_;
};

// Reads fields back; every read checks the bounds (nullopt / false on a short message).
class Reader {
 public:
  explicit Reader(const StoreBytes& bytes) : bytes_(bytes) {}
  std::optional<uint8_t> u8() {
    if (pos_ + 1 > bytes_.size()) return std::nullopt;
    return bytes_[pos_++];
  }
  std::optional<uint32_t> u32() { return raw<uint32_t>(); }
  std::optional<int64_t> i64() {
    const std::optional<uint64_t> v = raw<uint64_t>();
    return v ? std::optional<int64_t>(static_cast<int64_t>(*v)) : std::nullopt;
  }
  std::optional<StoreBytes> bytes() {
    const std::optional<uint32_t> n = u32();
    if (!n || pos_ + *n > bytes_.size()) return std::nullopt;
    StoreBytes out(bytes_.begin() + static_cast<std::ptrdiff_t>(pos_),
                   bytes_.begin() + static_cast<std::ptrdiff_t>(pos_ + *n));
    pos_ += *n;
    return out;
  }
  std::optional<std::string> text() {
    const std::optional<StoreBytes> b = bytes();
    return b ? std::optional<std::string>(to_string(*b)) : std::nullopt;
  }
  std::optional<std::vector<std::string>> texts() {
    const std::optional<uint32_t> n = u32();
    if (!n || *n > bytes_.size()) return std::nullopt;  // each entry takes at least 4 bytes
    std::vector<std::string> out;
    for (uint32_t i = 0; i < *n; ++i) {
      std::optional<std::string> s = text();
      if (!s) return std::nullopt;
      out.push_back(std::move(*s));
    }
    return out;
  }

 private:
  template <typename T>
  std::optional<T> raw() {
    if (pos_ + sizeof(T) > bytes_.size()) return std::nullopt;
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(bytes_[pos_ + i]) << (8 * i);
    pos_ += sizeof(T);
    return v;
  }
  const StoreBytes& bytes_;
  size_t pos_ = 0;
};

// Writes a whole message (length prefix, then `message`) to `fd`; false when the peer is gone.
bool send_message(int fd, const StoreBytes& message);
// Reads one whole message; nullopt when the peer closed the connection, the socket's receive
// timeout passed (`timed_out` set) or the message is larger than kMaxMessageBytes (`oversized` set:
// the peer speaks another protocol, e.g. another program listens on the store's port).
std::optional<StoreBytes> receive_message(int fd, bool* timed_out = nullptr, bool* oversized = nullptr);

}  // namespace dpscope::detail::wire
