// NumPy .npy files: the data format of `dpscope train --data x.npy,y.npy`.
//
// Reads format versions 1.0, 2.0 and 3.0 (3.0 only changes the header encoding to UTF-8) holding
// little-endian, C-order float32 ('<f4') or int64 ('<i8') arrays of any rank, 0-d and empty arrays
// included. The header is parsed as the Python dict literal it is: keys 'descr', 'fortran_order' and
// 'shape' in any order, any spacing, single or double quotes, an optional trailing comma, and
// Python's tuple rules ((3,) is a 1-D shape; (3) is the integer 3 and is rejected).
// Accepted byte-order marks: '<' (little-endian), '=' (native, little-endian on every host dpscope
// runs on), '|' ("not applicable", which NumPy also parses as native) and no mark at all (native).
// fortran_order=True is accepted only where the Fortran and C layouts coincide (at most one
// dimension larger than 1); otherwise it is refused like every other unsupported file.
//
// Everything else is refused with Error(kFormat) and one line "PATH: reason" — bad magic, unknown
// version, a header that is not a dict or lacks/duplicates a key, big-endian or other dtypes, object
// and structured arrays, a shape that disagrees with the file size (truncated data, trailing bytes).
// A missing or unreadable file is Error(kIo).
//
// save_npy writes version 1.0 exactly as numpy.save does (same header text, padded with spaces so the
// data starts at a multiple of 64 bytes), atomically (base/atomic_file.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "dpscope/core/tensor.hpp"

namespace dpscope {

struct NpyHeader {
  int major_version = 1;  // 1, 2 or 3
  DType dtype = DType::kF32;
  Shape shape;                     // () for a 0-d array
  uint64_t data_offset_bytes = 0;  // where the array data starts in the file
  uint64_t data_size_bytes = 0;    // numel * element size
};

// Reads only the header, and checks it against the file size.
NpyHeader read_npy_header(const std::filesystem::path& path);

// Loads the array into a new tensor on `device`, accounted under `category`. The bytes are read
// straight into the tensor's memory; no transfer time is charged (load on the cpu and call .to()
// when a simulation should show the host-to-device copy).
Tensor load_npy(const std::filesystem::path& path, const Device& device = Device::cpu(),
                MemoryCategory category = MemoryCategory::kBuffers);

// The same reader over bytes in memory; `source_name` stands in for the path in error messages.
Tensor load_npy_bytes(std::string_view bytes, const std::string& source_name,
                      const Device& device = Device::cpu(),
                      MemoryCategory category = MemoryCategory::kBuffers);

// Writes `tensor` (float32 or int64, any shape, with data) as a version 1.0 .npy file.
// Throws kInvalidArgument for an undefined tensor, kUnsupported for a timing-only tensor without
// data, kIo when the file cannot be written (the destination is then left as it was).
void save_npy(const std::filesystem::path& path, const Tensor& tensor);

// The header save_npy writes: magic, version 1.0 (2.0 if it would not fit), length, dict, padding.
std::string encode_npy_header(DType dtype, const Shape& shape);

}  // namespace dpscope
