// what_of() and error_of(): the message (and kind) of the dpscope::Error a call throws, for tests
// that compare error texts.
#pragma once

#include <functional>
#include <string>

#include "dpscope/base/error.hpp"

namespace dpscope::testing {

// Runs `f` and returns its dpscope::Error's message, or "(no error)" when it does not throw.
inline std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// What a call threw: the dpscope::Error's kind and message, or kInternal / "no error" when it
// returned normally.
struct Outcome {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message = "no error";
};

inline Outcome error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  }
  return {};
}

}  // namespace dpscope::testing
