// Helpers for the io and data tests: a scratch directory per test, little-endian byte builders,
// an exact-error expectation, and the optional Python (numpy, torch) runner whose tests skip with a
// reason when /usr/bin/python3 or the module is missing.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/core/preset.hpp"
#include "support/temp_files.hpp"

namespace dpscope::testing {

inline void write_bytes(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Little-endian encodings of integers, and the raw bytes of a list of values.
inline std::string le_bytes(uint64_t value, int width) {
  std::string out;
  for (int i = 0; i < width; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  return out;
}
template <typename T>
std::string raw_bytes(std::initializer_list<T> values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

// A small simulated GPU preset, so tests need no asset files.
inline HardwarePreset test_preset() {
  HardwarePreset p;
  p.id = "test-gpu";
  p.name = "Test GPU";
  p.memory_bytes = uint64_t{1} << 30;
  p.peak_flops = 1e13;
  p.mem_bandwidth_bytes_per_s = 1e12;
  p.launch_latency_ns = 1000;
  p.host_link = {"pcie4", 25e9, 1000};
  p.peer_link = {"nvlink4", 450e9, 500};
  p.topology = "nvswitch";
  return p;
}

struct PythonResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs `script` with /usr/bin/python3 (the interpreter the Debian torch/numpy packages belong to).
inline PythonResult run_python(const std::string& script) {
  TempDir dir;
  const auto script_path = dir.path() / "script.py";
  write_bytes(script_path, script);
  const std::string command = "/usr/bin/python3 '" + script_path.string() + "' 2>&1";
  PythonResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// True when `import MODULE` works in /usr/bin/python3 (cached per module).
inline bool python_has(const std::string& module) {
  static std::map<std::string, bool> cache;
  auto it = cache.find(module);
  if (it == cache.end())
    it = cache.emplace(module, run_python("import " + module + "\n").exit_code == 0).first;
  return it->second;
}

}  // namespace dpscope::testing

// Skips the current test, naming the missing Python module.
#define DPS_REQUIRE_PYTHON_MODULE(module)                                                              \
  do {                                                                                                 \
    if (!::dpscope::testing::python_has(module))                                                       \
      GTEST_SKIP() << "/usr/bin/python3 cannot import " << (module) << "; this parity check needs it"; \
  } while (0)

// Expects `statement` to throw dpscope::Error of `kind` with exactly `message`.
#define EXPECT_DPS_ERROR(statement, expected_kind, expected_message)                             \
  do {                                                                                           \
    try {                                                                                        \
      statement;                                                                                 \
      ADD_FAILURE() << "expected dpscope::Error \"" << (expected_message) << "\", got no error"; \
    } catch (const ::dpscope::Error& e) {                                                        \
      EXPECT_EQ(e.kind(), (expected_kind)) << e.what();                                          \
      EXPECT_EQ(std::string(e.what()), std::string(expected_message));                           \
    }                                                                                            \
  } while (0)
