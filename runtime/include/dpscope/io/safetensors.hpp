// safetensors files: the weight format of `dpscope train --init in.safetensors --save out.safetensors`.
//
// Layout (huggingface/safetensors): an 8-byte little-endian u64 N, then N bytes of JSON header
//   {"__metadata__": {"format": "pt"}, "0.weight": {"dtype": "F32", "shape": [512, 784],
//    "data_offsets": [0, 1605632]}, ...}
// padded with spaces, then the byte buffer; data_offsets are [begin, end) relative to the buffer.
// Names follow PyTorch's state_dict (`0.weight`, `0.bias`, `2.weight`, ...), so a PyTorch user can
// bring `model.state_dict()` saved with safetensors.torch.save_file and compare number for number.
//
// Reading keeps the file's header order (safetensors' Python writer sorts tensors by dtype and name;
// whatever order is on disk is the order returned). dpscope reads F32 and I64 tensors and refuses
// every other dtype by name. The whole header is validated before any tensor is allocated:
// N within the file and under 100 MB, valid JSON, no duplicate keys (at any depth), every entry with
// dtype/shape/data_offsets, end - begin == numel * element size, and the tensors' byte ranges tiling
// the buffer exactly: no overlaps, no holes, nothing after the last tensor. Each failure is
// Error(kFormat) "PATH: reason" naming the tensor; a missing file is Error(kIo).
//
// Writing keeps the order given, lays the tensors out back to back, pads the header with spaces to a
// multiple of 8 bytes (as the reference writer does) and replaces the file atomically.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dpscope/core/tensor.hpp"

namespace dpscope {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using SafetensorsMetadata = std::map<std::string, std::string>;

inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;  // the reference reader's limit

// One header entry, as validated.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t begin_bytes = 0;  // [begin, end) within the data buffer
  uint64_t end_bytes = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in file order
  SafetensorsMetadata metadata;           // "__metadata__", empty when absent
  uint64_t data_offset_bytes = 0;         // 8 + N: where the buffer starts in the file
};

// Reads and validates the header only.
SafetensorsHeader read_safetensors_header(const std::filesystem::path& path);
SafetensorsMetadata read_safetensors_metadata(const std::filesystem::path& path);

// Loads every tensor, in file order, onto `device` (read straight into the tensors' memory; no
// transfer time is charged), accounted under `category`.
NamedTensors load_safetensors(const std::filesystem::path& path, const Device& device = Device::cpu(),
                              MemoryCategory category = MemoryCategory::kParameters);

// The same reader over bytes in memory; `source_name` stands in for the path in error messages.
NamedTensors load_safetensors_bytes(std::string_view bytes, const std::string& source_name,
                                    const Device& device = Device::cpu(),
                                    MemoryCategory category = MemoryCategory::kParameters);

// Writes `tensors` in the given order with optional string metadata (omitted when empty).
// Throws kInvalidArgument for an empty, duplicate or reserved ("__metadata__") name or an undefined
// tensor, kUnsupported for a tensor without data (timing-only), kIo when the file cannot be written;
// on any failure the destination keeps its previous content.
void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const SafetensorsMetadata& metadata = {});

// The tensor called `name`; throws kInvalidArgument "no tensor named 'x' (have: a, b, ...)".
const Tensor& find_tensor(const NamedTensors& tensors, std::string_view name);

}  // namespace dpscope
