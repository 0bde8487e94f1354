// Helpers for tests that run the built `dpscope` command (any area): run it, capture output and exit code.
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "support/temp_files.hpp"

namespace dpscope::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

inline CommandResult run_dpscope(const std::string& args) {
  return run_command(std::string(DPSCOPE_CLI) + " " + args);
}

// `dpscope ARGS` killed after `seconds` (exit 124): a hang fails the test instead of the suite.
inline CommandResult run_dpscope_within(int seconds, const std::string& args) {
  return run_command("timeout " + std::to_string(seconds) + " " + std::string(DPSCOPE_CLI) + " " + args);
}

// A usage error as the command line promises it: exit 2 and exactly one line,
// "dpscope: error: <...needle...>".
inline void expect_usage_error_line(const CommandResult& r, const std::string& args,
                                    const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  EXPECT_EQ(r.output.rfind("dpscope: error: ", 0), 0u) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.output;
}

// The python3 the parity tests run, chosen as tests/python/with_torch.sh chooses: $DPSCOPE_PYTHON
// when set (only it), else the first of the python3 on PATH and Debian's /usr/bin/python3
// (python3-torch) that imports torch and numpy, else the python3 on PATH (torch_available() is then
// false). A machine whose PATH leads to another Python (pyenv) still checks against Debian's torch.
inline std::string python3() {
  static const std::string chosen = [] {
    const char* env = std::getenv("DPSCOPE_PYTHON");
    if (env != nullptr && *env != '\0') return std::string(env);
    for (const char* candidate : {"python3", "/usr/bin/python3"})
      if (run_command(std::string(candidate) + " -c 'import torch, numpy' 2>/dev/null").exit_code == 0)
        return std::string(candidate);
    return std::string("python3");
  }();
  return chosen;
}

inline bool torch_available() {
  static const bool available = run_command(python3() + " -c 'import torch, numpy'").exit_code == 0;
  return available;
}

}  // namespace dpscope::testing
