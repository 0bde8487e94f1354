// ByteSource: random-access reading of a file or an in-memory buffer, for the npy and safetensors
// readers (private to runtime/src/io). Reading from memory lets the fuzz targets and tests drive the
// exact code path that reads files. Errors name the source as the user gave it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace dpscope::io_detail {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // The file path (or a caller-chosen label for memory), used at the start of every error message.
  const std::string& name() const { return name_; }
  uint64_t size_bytes() const { return size_bytes_; }
  // Copies [offset, offset + count) into `dst`; the caller has checked the range against
  // size_bytes(). Throws Error(kIo) when the read fails (the file shrank, an I/O error).
  virtual void read_at(uint64_t offset_bytes, void* dst, uint64_t count_bytes) const = 0;

 protected:
  ByteSource(std::string name, uint64_t size_bytes) : name_(std::move(name)), size_bytes_(size_bytes) {}

 private:
  std::string name_;
  uint64_t size_bytes_;
};

// Opens a regular file; throws Error(kIo) "cannot read 'PATH': REASON" (no such file, is a
// directory, is a FIFO (named pipe), not a regular file, ...): never blocks (base/file_guard.hpp).
class FileByteSource final : public ByteSource {
 public:
  explicit FileByteSource(const std::filesystem::path& path);
  ~FileByteSource() override;
  FileByteSource(const FileByteSource&) = delete;
  FileByteSource& operator=(const FileByteSource&) = delete;
  void read_at(uint64_t offset_bytes, void* dst, uint64_t count_bytes) const override;

 private:
  FileByteSource(const std::filesystem::path& path, int fd);
  int fd_;
};

// Reads from a caller-owned buffer that must outlive the source.
class MemoryByteSource final : public ByteSource {
 public:
  MemoryByteSource(std::string_view bytes, std::string name)
      : ByteSource(std::move(name), bytes.size()), bytes_(bytes) {}
  void read_at(uint64_t offset_bytes, void* dst, uint64_t count_bytes) const override;

 private:
  std::string_view bytes_;
};

// `text` with control characters and non-ASCII bytes written as \xNN, so that names taken from a
// malformed file keep an error message on one readable line.
std::string printable(std::string_view text);

}  // namespace dpscope::io_detail
