// safetensors reader and writer (see io/safetensors.hpp for the format and the checks).
//
// Sections: header JSON parsing (with duplicate-key detection) · entry validation · buffer tiling ·
// reading · writing.
#include "dpscope/io/safetensors.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>

#include "dpscope/base/atomic_file.hpp"
#include "io/byte_source.hpp"
#include "io/tensor_bytes.hpp"

namespace dpscope {

static_assert(std::endian::native == std::endian::little,
              "dpscope's file readers assume a little-endian host");

namespace {

using io_detail::ByteSource;
using io_detail::printable;
using Json = nlohmann::ordered_json;  // keeps the header's key order: tensors load in file order

constexpr std::string_view kMetadataKey = "__metadata__";

[[noreturn]] void fail(const std::string& file, const std::string& reason) {
  throw Error(ErrorKind::kFormat, fmt::format("{}: {}", file, reason));
}

const char* dtype_name(DType dtype) { return dtype == DType::kF32 ? "F32" : "I64"; }

// Every dtype the safetensors format defines; the ones dpscope cannot hold are refused by name.
bool is_known_dtype(std::string_view name) {
  static constexpr std::array<std::string_view, 19> kKnown{
      "BOOL", "U8",  "I8",  "I16",     "U16",     "F16",     "BF16",    "I32",     "U32", "F32",
      "F64",  "I64", "U64", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4"};
  return std::find(kKnown.begin(), kKnown.end(), name) != kKnown.end();
}

// ---------------------------------------------------------------------------------------------
// Header JSON. nlohmann keeps only the last of two equal keys, so a parser callback watches the
// keys of every open object and remembers the first duplicate.

Json parse_header_json(const std::string& text, const std::string& file) {
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  bool duplicate_is_tensor_name = false;
  const Json::parser_callback_t watch_keys = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    using Event = Json::parse_event_t;
    if (event == Event::object_start) {
      open_objects.emplace_back();
    } else if (event == Event::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == Event::key && !open_objects.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second && !duplicate) {
        duplicate = key;
        duplicate_is_tensor_name = open_objects.size() == 1;
      }
    }
    return true;
  };
  Json header;
  try {
    header = Json::parse(text, watch_keys);
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();  // "[json.exception.parse_error.101] parse error at line 1, ..."
    if (const auto close = what.find("] "); what.starts_with("[json.exception") && close != std::string::npos)
      what.erase(0, close + 2);
    fail(file, fmt::format("header is not valid JSON: {}", what));
  }
  if (duplicate) {
    fail(file, duplicate_is_tensor_name
                   ? fmt::format("duplicate tensor name '{}' in the header", printable(*duplicate))
                   : fmt::format("duplicate key '{}' in the header", printable(*duplicate)));
  }
  return header;  // an object: the text starts with '{' and parsed completely
}

// ---------------------------------------------------------------------------------------------
// Entry validation

SafetensorsMetadata parse_metadata(const Json& value, const std::string& file) {
  if (!value.is_object()) fail(file, "'__metadata__' must be an object mapping strings to strings");
  SafetensorsMetadata metadata;
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string())
      fail(file, fmt::format("'__metadata__' must map strings to strings, but '{}' is a {}", printable(key),
                             v.type_name()));
    metadata.emplace(key, v.get<std::string>());
  }
  return metadata;
}

uint64_t get_offset(const Json& v) { return v.get<uint64_t>(); }

SafetensorsEntry parse_entry(const std::string& name, const Json& info, const std::string& file) {
  const std::string shown = printable(name);  // for messages
  if (!info.is_object())
    fail(file, fmt::format("tensor '{}' must be an object with dtype, shape and data_offsets", shown));
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!info.contains(key)) fail(file, fmt::format("tensor '{}' lacks '{}'", shown, key));
  SafetensorsEntry e;
  e.name = name;

  const Json& dtype = info["dtype"];
  if (!dtype.is_string())
    fail(file, fmt::format("tensor '{}': 'dtype' must be a string such as \"F32\"", name));
  const std::string dtype_text = dtype.get<std::string>();
  if (dtype_text == "F32") {
    e.dtype = DType::kF32;
  } else if (dtype_text == "I64") {
    e.dtype = DType::kI64;
  } else if (is_known_dtype(dtype_text)) {
    fail(file, fmt::format("tensor '{}' has dtype {}, which dpscope does not read (it reads F32 and I64); "
                           "convert it before saving, e.g. t.float()",
                           shown, printable(dtype_text)));
  } else {
    fail(file, fmt::format("tensor '{}' has an unknown dtype '{}'", shown, printable(dtype_text)));
  }

  const Json& shape = info["shape"];
  const bool shape_ok = shape.is_array() && std::all_of(shape.begin(), shape.end(), [](const Json& d) {
                          return d.is_number_unsigned() && d.get<uint64_t>() <= (uint64_t{1} << 62);
                        });
  if (!shape_ok)
    fail(file, fmt::format("tensor '{}': 'shape' must be a list of non-negative integers", shown));
  for (const Json& d : shape) e.shape.push_back(d.get<int64_t>());
  uint64_t nbytes = element_size(e.dtype);
  for (int64_t d : e.shape)
    if (__builtin_mul_overflow(nbytes, static_cast<uint64_t>(d), &nbytes))
      fail(file, fmt::format("tensor '{}': shape {} is too large", shown, shape_to_string(e.shape)));

  const Json& offsets = info["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    fail(file,
         fmt::format("tensor '{}': 'data_offsets' must be [begin, end], two non-negative integers", shown));
  e.begin_bytes = get_offset(offsets[0]);
  e.end_bytes = get_offset(offsets[1]);
  if (e.end_bytes < e.begin_bytes)
    fail(file, fmt::format("tensor '{}': data_offsets [{}, {}] end before they begin", shown, e.begin_bytes,
                           e.end_bytes));
  if (e.end_bytes - e.begin_bytes != nbytes)
    fail(file, fmt::format("tensor '{}': shape {} {} needs {} bytes but data_offsets [{}, {}] span {}", shown,
                           shape_to_string(e.shape), dtype_text, nbytes, e.begin_bytes, e.end_bytes,
                           e.end_bytes - e.begin_bytes));
  return e;
}

// ---------------------------------------------------------------------------------------------
// Buffer tiling: sorted by offset, the tensors must cover [0, buffer) exactly once.

void check_tiling(const std::vector<SafetensorsEntry>& entries, uint64_t buffer_bytes,
                  const std::string& file) {
  for (const SafetensorsEntry& e : entries)
    if (e.end_bytes > buffer_bytes)
      fail(file,
           fmt::format("tensor '{}': data_offsets [{}, {}] reach past the end of the {}-byte data buffer "
                       "(truncated file?)",
                       printable(e.name), e.begin_bytes, e.end_bytes, buffer_bytes));
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(entries[a].begin_bytes, entries[a].end_bytes) <
           std::pair(entries[b].begin_bytes, entries[b].end_bytes);
  });
  uint64_t covered = 0;                    // bytes [0, covered) belong to tensors seen so far
  const SafetensorsEntry* last = nullptr;  // the tensor that ends at `covered`
  for (size_t i : order) {
    const SafetensorsEntry& e = entries[i];
    if (e.begin_bytes < covered)
      fail(file, fmt::format("tensors '{}' [{}, {}) and '{}' [{}, {}) overlap in the data buffer",
                             printable(last->name), last->begin_bytes, last->end_bytes, printable(e.name),
                             e.begin_bytes, e.end_bytes));
    if (e.begin_bytes > covered)
      fail(file,
           fmt::format("bytes [{}, {}) of the data buffer belong to no tensor", covered, e.begin_bytes));
    if (e.end_bytes > covered || last == nullptr) {
      covered = e.end_bytes;
      last = &e;
    }
  }
  if (covered < buffer_bytes)
    fail(file, fmt::format("bytes [{}, {}) of the data buffer belong to no tensor (trailing data)", covered,
                           buffer_bytes));
}

// ---------------------------------------------------------------------------------------------
// Reading

SafetensorsHeader read_header(const ByteSource& src) {
  const std::string& file = src.name();
  const uint64_t size = src.size_bytes();
  if (size < 8)
    fail(file,
         fmt::format("too short to be a safetensors file ({} bytes; the header length alone takes 8)", size));
  std::array<unsigned char, 8> len_bytes{};
  src.read_at(0, len_bytes.data(), 8);
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= uint64_t{len_bytes[static_cast<size_t>(i)]} << (8 * i);
  if (header_len > kSafetensorsMaxHeaderBytes)
    fail(file, fmt::format("header length {} bytes is over the {}-byte limit (not a safetensors file?)",
                           header_len, kSafetensorsMaxHeaderBytes));
  if (header_len > size - 8)
    fail(file, fmt::format("header length {} bytes exceeds the {} bytes that follow it (truncated file?)",
                           header_len, size - 8));
  std::string text(header_len, '\0');
  src.read_at(8, text.data(), header_len);
  if (!text.starts_with('{')) fail(file, "header does not start with '{' (not a safetensors file?)");
  const Json json = parse_header_json(text, file);

  SafetensorsHeader header;
  header.data_offset_bytes = 8 + header_len;
  for (const auto& [name, info] : json.items()) {
    if (name == kMetadataKey) {
      header.metadata = parse_metadata(info, file);
    } else {
      header.entries.push_back(parse_entry(name, info, file));
    }
  }
  check_tiling(header.entries, size - header.data_offset_bytes, file);
  return header;
}

NamedTensors read_tensors(const ByteSource& src, const Device& device, MemoryCategory category) {
  const SafetensorsHeader header = read_header(src);
  NamedTensors out;
  out.reserve(header.entries.size());
  for (const SafetensorsEntry& e : header.entries) {
    Tensor t = Tensor::empty(e.shape, device, category, e.dtype);
    if (t.nbytes() > 0)
      src.read_at(header.data_offset_bytes + e.begin_bytes, io_detail::tensor_bytes(t), t.nbytes());
    out.emplace_back(e.name, std::move(t));
  }
  return out;
}

}  // namespace

SafetensorsHeader read_safetensors_header(const std::filesystem::path& path) {
  return read_header(io_detail::FileByteSource(path));
}

SafetensorsMetadata read_safetensors_metadata(const std::filesystem::path& path) {
  return read_safetensors_header(path).metadata;
}

NamedTensors load_safetensors(const std::filesystem::path& path, const Device& device,
                              MemoryCategory category) {
  return read_tensors(io_detail::FileByteSource(path), device, category);
}

NamedTensors load_safetensors_bytes(std::string_view bytes, const std::string& source_name,
                                    const Device& device, MemoryCategory category) {
  return read_tensors(io_detail::MemoryByteSource(bytes, source_name), device, category);
}

// ---------------------------------------------------------------------------------------------
// Writing

void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const SafetensorsMetadata& metadata) {
  const std::string file = path.string();
  Json header = Json::object();
  if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    DPS_CHECK(!name.empty(), ErrorKind::kInvalidArgument, "{}: tensor names must not be empty", file);
    DPS_CHECK(name != kMetadataKey, ErrorKind::kInvalidArgument,
              "{}: '{}' is reserved for metadata, not a tensor name", file, name);
    DPS_CHECK(!header.contains(name), ErrorKind::kInvalidArgument, "{}: tensor name '{}' appears twice", file,
              name);
    io_detail::check_saveable(t, file, fmt::format("tensor '{}'", name));
    header[name] = Json{{"dtype", dtype_name(t.dtype())},
                        {"shape", t.shape()},
                        {"data_offsets", Json::array({offset, offset + t.nbytes()})}};
    offset += t.nbytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::type_error&) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: a tensor name or metadata string is not valid UTF-8", file));
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the reference writer pads the header to 8 bytes

  std::array<char, 8> len_bytes{};
  for (size_t i = 0; i < 8; ++i) len_bytes[i] = static_cast<char>((uint64_t{text.size()} >> (8 * i)) & 0xFF);
  AtomicFileWriter out(path);
  out.write(len_bytes.data(), len_bytes.size());
  out.write(text);
  for (const auto& [name, t] : tensors)
    if (t.nbytes() > 0) out.write(io_detail::tensor_bytes(t), t.nbytes());
  out.commit();
}

const Tensor& find_tensor(const NamedTensors& tensors, std::string_view name) {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  std::vector<std::string_view> names;
  for (size_t i = 0; i < tensors.size() && i < 8; ++i) names.push_back(tensors[i].first);
  throw Error(ErrorKind::kInvalidArgument,
              fmt::format("no tensor named '{}' (have: {}{})", name, fmt::join(names, ", "),
                          tensors.size() > names.size() ? ", ..." : ""));
}

}  // namespace dpscope
