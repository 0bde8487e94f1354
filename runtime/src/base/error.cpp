// dpscope::Error implementation.
#include "dpscope/base/error.hpp"

#include <filesystem>

namespace dpscope {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "invalid argument";
    case ErrorKind::kUsage: return "usage";
    case ErrorKind::kIo: return "i/o";
    case ErrorKind::kFormat: return "format";
    case ErrorKind::kDevice: return "device";
    case ErrorKind::kOutOfMemory: return "out of memory";
    case ErrorKind::kTimeout: return "timeout";
    case ErrorKind::kMismatch: return "mismatch";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kProcess: return "process";
    case ErrorKind::kInternal: return "internal";
    case ErrorKind::kWriteFailed: return "write failed";
  }
  return "unknown";
}

Error::Error(ErrorKind kind, const std::string& message, std::source_location where)
    : std::runtime_error(message),
      kind_(kind),
      where_(
          fmt::format("{}:{}", std::filesystem::path(where.file_name()).filename().string(), where.line())) {}

bool Error::is_usage_error() const {
  switch (kind_) {
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kUsage:
    case ErrorKind::kIo:
    case ErrorKind::kFormat:
    case ErrorKind::kDevice:
    case ErrorKind::kMismatch:
    case ErrorKind::kUnsupported: return true;
    default: return false;
  }
}

}  // namespace dpscope
