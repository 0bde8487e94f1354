// A standalone mutation driver for the io fuzz targets, for toolchains without libFuzzer.
//
// libFuzzer needs clang, and clang 14 (Debian 12) cannot compile <source_location> against
// libstdc++ 12, which dpscope's errors use; clang >= 15 builds the targets as their headers say.
// With g++ this driver stands in: it mutates each target's seed files (byte flips, inserts,
// deletions, duplicated ranges, "interesting" bytes, truncation) and feeds them to the target's
// LLVMFuzzerTestOneInput under AddressSanitizer and UBSan (the command is one line, wrapped here):
//   g++ -std=c++20 -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined
//     -Iruntime/include -Iruntime/src tests/fuzz/io_fuzz_main.cpp tests/fuzz/io_npy_fuzz.cpp
//     runtime/src/io/npy.cpp runtime/src/io/byte_source.cpp build-io/runtime/libdpscope.a
//     -lfmt -lopenblas -lsimdjson -ltomlplusplus -o /tmp/io_npy_fuzz_gcc
//   /tmp/io_npy_fuzz_gcc 200000        # iterations (default 100000)
// On a failure (a sanitizer report or a broken property's abort) the input is saved to
// ./io-fuzz-failure.bin; replay it with /tmp/io_npy_fuzz_gcc --replay io-fuzz-failure.bin.
#include <fcntl.h>
#include <sanitizer/common_interface_defs.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
std::vector<std::string> fuzz_seeds();  // valid inputs, defined next to each target

namespace {

std::string g_current;  // the input being tested, saved when the process dies

// Async-signal-safe: only open/write/close.
void save_current_input() {
  const int fd = ::open("io-fuzz-failure.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  const ssize_t written = ::write(fd, g_current.data(), g_current.size());
  (void)written;
  ::close(fd);
}

void on_abort(int) {
  save_current_input();
  std::signal(SIGABRT, SIG_DFL);
  std::abort();
}

std::string mutate(std::string s, std::mt19937& rng) {
  static const std::string kInteresting = "0123456789-,()[]{}:'\" \n\x00\xff\x7f\x80TF";
  const auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 6) {
      case 0:
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1: s.insert(pick(s.size() + 1), 1, kInteresting[pick(kInteresting.size())]); break;
      case 2:
        if (!s.empty()) {
          const size_t at = pick(s.size());
          s.erase(at, 1 + pick(8));
        }
        break;
      case 3:
        if (!s.empty()) {
          const size_t at = pick(s.size());
          const std::string piece = s.substr(at, 1 + pick(16));
          s.insert(pick(s.size() + 1), piece);
        }
        break;
      case 4:
        if (!s.empty()) s[pick(s.size())] = kInteresting[pick(kInteresting.size())];
        break;
      default: s.resize(pick(s.size() + 1)); break;
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--replay") == 0) {
    std::ifstream in(argv[2], std::ios::binary);
    const std::string input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    std::printf("replayed %zu bytes, no failure\n", input.size());
    return 0;
  }
  __sanitizer_set_death_callback(save_current_input);
  std::signal(SIGABRT, on_abort);
  const long iterations = argc > 1 ? std::atol(argv[1]) : 100000;
  const std::vector<std::string> seeds = fuzz_seeds();
  std::mt19937 rng(12345);
  for (long i = 0; i < iterations; ++i) {
    std::string input = seeds[static_cast<size_t>(rng() % seeds.size())];
    for (int round = 0, rounds = 1 + static_cast<int>(rng() % 3); round < rounds; ++round)
      input = mutate(input, rng);
    g_current = input;
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(g_current.data()), g_current.size());
  }
  std::printf("%ld inputs, no failure\n", iterations);
  return 0;
}
