// libFuzzer target for the .npy reader (io/npy.hpp). Its corpus replays in the normal suite.
//
// Property: any byte string is either refused with Error(kFormat) or accepted as a tensor whose
// bytes fit in the input and which re-encodes (encode_npy_header + data) into a file that loads
// back to the same shape, dtype and bytes. Build and run from the repository root, after building
// libdpscope in build-io (clang >= 15; with g++ use io_fuzz_main.cpp instead of -fsanitize=fuzzer); one
// command, wrapped here:
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Iruntime/include -Iruntime/src
//     tests/fuzz/io_npy_fuzz.cpp runtime/src/io/npy.cpp runtime/src/io/byte_source.cpp
//     build-io/runtime/libdpscope.a -lfmt -lopenblas -lsimdjson -ltomlplusplus -o /tmp/io_npy_fuzz
//   /tmp/io_npy_fuzz -max_total_time=60 -max_len=4096
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "dpscope/io/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  dpscope::Tensor t;
  try {
    t = dpscope::load_npy_bytes(bytes, "fuzz.npy");
  } catch (const dpscope::Error& e) {
    if (e.kind() != dpscope::ErrorKind::kFormat) std::abort();  // bytes are refused as a format error, always
    return 0;
  }
  if (t.nbytes() > size) std::abort();
  const auto* raw = t.dtype() == dpscope::DType::kF32 ? static_cast<const void*>(t.f32())
                                                      : static_cast<const void*>(t.i64());
  std::string again = dpscope::encode_npy_header(t.dtype(), t.shape());
  again.append(static_cast<const char*>(raw), t.nbytes());
  const dpscope::Tensor u = dpscope::load_npy_bytes(again, "re-encoded.npy");
  const auto* raw_u = u.dtype() == dpscope::DType::kF32 ? static_cast<const void*>(u.f32())
                                                        : static_cast<const void*>(u.i64());
  if (u.shape() != t.shape() || u.dtype() != t.dtype()) std::abort();
  if (t.nbytes() > 0 && std::memcmp(raw, raw_u, t.nbytes()) != 0) std::abort();
  return 0;
}

// Seed inputs for io_fuzz_main.cpp: valid files of both dtypes, several ranks, both header versions.
std::vector<std::string> fuzz_seeds() {
  std::vector<std::string> seeds;
  const std::vector<std::pair<dpscope::DType, dpscope::Shape>> cases{{dpscope::DType::kF32, {2, 3}},
                                                                     {dpscope::DType::kI64, {4}},
                                                                     {dpscope::DType::kF32, {}},
                                                                     {dpscope::DType::kF32, {0, 5}},
                                                                     {dpscope::DType::kI64, {1, 2, 1}}};
  for (const auto& [dtype, shape] : cases) {
    std::string file = dpscope::encode_npy_header(dtype, shape);
    file.append(static_cast<size_t>(dpscope::shape_numel(shape)) * dpscope::element_size(dtype), '\x01');
    seeds.push_back(file);
  }
  const std::string v2_header = "{ \"shape\" : (2,) , 'descr':'<f4','fortran_order':True }\n";
  seeds.push_back(std::string("\x93NUMPY\x02\x00", 8) + static_cast<char>(v2_header.size()) +
                  std::string(3, '\0') + v2_header + std::string(8, '\x02'));
  return seeds;
}
