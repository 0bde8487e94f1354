// dpscope::Error — the one exception type the runtime throws.
//
// Errors come in three tiers:
//  * expected failures (bad file, bad flag, OOM, timeout, unsupported op) throw dpscope::Error with a
//    kind the caller can branch on and a one-line message that names the thing and the reason;
//  * programmer mistakes are caught by DPS_ASSERT, which also throws (never aborts a teaching
//    session) but with kind Internal and a hint how to fix the misuse;
//  * the library never calls exit(): the CLI maps ErrorKind::Usage-like kinds to exit code 2.
#pragma once

#include <fmt/format.h>

#include <source_location>
#include <stdexcept>
#include <string>

namespace dpscope {

enum class ErrorKind {
  kInvalidArgument,  // a value the caller passed is out of range or inconsistent
  kUsage,            // a CLI flag or option combination is wrong
  kIo,               // a file could not be opened, read or written
  kFormat,           // a file's content is malformed (npy, safetensors, trace, lesson)
  kDevice,           // tensors on different devices, unknown device name
  kOutOfMemory,      // an allocation past a simulated device's capacity
  kTimeout,          // a collective waited longer than its group's timeout
  kMismatch,         // ranks disagree (collective signature, parameter shapes)
  kUnsupported,      // an op a backend or mode does not provide (yet)
  kProcess,          // a process of the job failed, was killed or was stopped by a signal
  kInternal,         // a broken invariant: a bug in dpscope or a misuse of its API
  // An output could not be written once the work had started (disk full, an I/O error while writing
  // a trace, a checkpoint or --save): a runtime failure, unlike kIo (a file the user named cannot be
  // opened or read), so the CLI exits with code 1. The message carries strerror's reason.
  kWriteFailed,
};

const char* to_string(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message,
        std::source_location where = std::source_location::current());

  ErrorKind kind() const { return kind_; }
  // "file.cpp:123" of the throw site, for --verbose output and bug reports.
  const std::string& where() const { return where_; }

  // True for errors a user caused with their input (flags, files): the CLI exits with code 2.
  bool is_usage_error() const;

 private:
  ErrorKind kind_;
  std::string where_;
};

}  // namespace dpscope

// Throws dpscope::Error(kind, fmt::format(...)) unless `cond` holds.
#define DPS_CHECK(cond, kind, ...)                                           \
  do {                                                                       \
    if (!(cond)) throw ::dpscope::Error((kind), ::fmt::format(__VA_ARGS__)); \
  } while (0)

// An always-on invariant check for programmer mistakes; the message should say how to fix it.
#define DPS_ASSERT(cond, ...)                                                                  \
  do {                                                                                         \
    if (!(cond))                                                                               \
      throw ::dpscope::Error(                                                                  \
          ::dpscope::ErrorKind::kInternal,                                                     \
          ::fmt::format("internal check '{}' failed: {}", #cond, ::fmt::format(__VA_ARGS__))); \
  } while (0)
