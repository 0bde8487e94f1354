// FileFollower: follows one trace file that is still being written (internal to libdpscope).
//
// Behind TraceFollower (reader.hpp) for a file, and once per rank file behind its directory
// follower (directory_follower.hpp). Each poll() parses the complete lines appended since the last
// one into data(); a file truncated, rewritten in place or replaced (a new run writing to the same
// path) clears data() and is read again from its start. A file whose content is a zstd stream
// (compressed.hpp) is decoded as it grows: the decoder and the bytes fed to it are kept between
// polls, so each poll decodes only the new bytes; a frame not yet ended is simply more to come.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "dpscope/trace_tools/compressed.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "trace_parser.hpp"

namespace dpscope::trace::detail {

class FileFollower {
 public:
  FileFollower(std::filesystem::path path, ReadOptions options);
  // The number of new events; 0 when nothing complete was added. A missing file is waited for.
  // Throws Error(kFormat) for a bad header (at every poll until it changes) and, in strict mode,
  // for a malformed event line (the next poll goes on after it); kIo when the file cannot be read.
  size_t poll();
  bool has_header() const { return has_header_; }
  const TraceData& data() const { return data_; }
  TraceData& data() { return data_; }
  size_t restarts() const { return restarts_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void restart();
  // The new bytes `raw` of a zstd file: decoded, then their complete lines parsed.
  std::string_view decode_new_bytes(const std::string& raw);

  std::filesystem::path path_;
  ReadOptions options_;
  TraceData data_;
  uint64_t offset_ = 0;  // bytes consumed (plain: complete lines only; zstd: every byte fed to the decoder)
  uint32_t next_line_ = 1;
  bool has_header_ = false;
  std::unique_ptr<TraceParser> parser_;
  std::string header_line_;    // the file's first bytes and the last consumed ones, compared at
  std::string consumed_tail_;  // each poll to notice a file rewritten in place
  uint64_t file_dev_ = 0;      // identity of the file being followed (stat st_dev, st_ino)
  uint64_t file_ino_ = 0;
  size_t restarts_ = 0;
  enum class Encoding { kUnknown, kPlain, kZstd };  // decided by the file's first bytes
  Encoding encoding_ = Encoding::kUnknown;
  std::unique_ptr<ZstdDecoder> decoder_;
  std::string decoded_;  // zstd: decoded text not yet parsed (an incomplete last line)
};

}  // namespace dpscope::trace::detail
