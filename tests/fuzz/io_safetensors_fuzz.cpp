// libFuzzer target for the safetensors reader (io/safetensors.hpp). Its corpus replays in the normal suite.
//
// Property: any byte string is either refused with Error(kFormat) or accepted as tensors whose
// bytes add up to at most the input size and whose names are unique and never "__metadata__".
// Build and run from the repository root, after building libdpscope in build-io (clang >= 15; with
// g++ use io_fuzz_main.cpp instead of -fsanitize=fuzzer, see there); one command, wrapped here:
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Iruntime/include -Iruntime/src
//     tests/fuzz/io_safetensors_fuzz.cpp runtime/src/io/safetensors.cpp runtime/src/io/byte_source.cpp
//     build-io/runtime/libdpscope.a -lfmt -lopenblas -lsimdjson -ltomlplusplus -o /tmp/io_safetensors_fuzz
//   /tmp/io_safetensors_fuzz -max_total_time=60 -max_len=4096 -dict=tests/fuzz/io_safetensors.dict
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "dpscope/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  dpscope::NamedTensors tensors;
  try {
    tensors = dpscope::load_safetensors_bytes(bytes, "fuzz.safetensors");
  } catch (const dpscope::Error& e) {
    if (e.kind() != dpscope::ErrorKind::kFormat) std::abort();  // bytes are refused as a format error, always
    return 0;
  }
  uint64_t total_bytes = 0;
  std::set<std::string> names;
  for (const auto& [name, t] : tensors) {
    total_bytes += t.nbytes();
    if (name == "__metadata__" || !names.insert(name).second) std::abort();
  }
  if (total_bytes + 8 > size) std::abort();
  return 0;
}

// Seed inputs for io_fuzz_main.cpp: small valid files, with and without metadata.
std::vector<std::string> fuzz_seeds() {
  const auto file = [](const std::string& header, size_t buffer_bytes) {
    std::string out;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xFF));
    return out + header + std::string(buffer_bytes, '\x03');
  };
  return {
      file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8),
      file(
          R"({"__metadata__":{"format":"pt"},"a":{"dtype":"I64","shape":[1,2],"data_offsets":[0,16]},)"
          R"("b":{"dtype":"F32","shape":[],"data_offsets":[16,20]},"e":{"dtype":"F32","shape":[0],"data_offsets":[20,20]}})",
          20),
      file("{}      ", 0),
  };
}
