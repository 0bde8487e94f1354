// what_of(): the message of the dpscope::Error a call throws, for tests that compare error texts.
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

}  // namespace dpscope::testing
