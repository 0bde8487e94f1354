// A growable run of bytes that is never value-initialised (internal to libdpscope).
//
// The trace reader fills gigabytes of text a piece at a time; std::string would zero every byte it
// grows by before the file's bytes overwrite them, and a new string per piece would fault in fresh
// pages each time. A TextBuffer keeps its capacity when cleared, so a few of them are reused for
// the whole file (text_pieces.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>

namespace dpscope::trace::detail {

class TextBuffer {
 public:
  const char* data() const { return bytes_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }
  std::string_view view() const { return {bytes_.get(), size_}; }
  void clear() { size_ = 0; }

  // Room for at least `n` more bytes past size(), growing geometrically: the bytes to write next.
  char* room(size_t n) {
    if (capacity_ - size_ < n) {
      const size_t capacity = std::max(size_ + n, 2 * capacity_);
      std::unique_ptr<char[]> bytes(new char[capacity]);  // default-initialised: not zeroed
      if (size_ > 0) std::memcpy(bytes.get(), bytes_.get(), size_);
      bytes_ = std::move(bytes);
      capacity_ = capacity;
    }
    return bytes_.get() + size_;
  }
  size_t free_bytes() const { return capacity_ - size_; }
  // The next `n` bytes of room() were written.
  void grow(size_t n) { size_ += n; }

 private:
  std::unique_ptr<char[]> bytes_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace dpscope::trace::detail
