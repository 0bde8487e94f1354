// NumPy .npy reader and writer (see io/npy.hpp for what is accepted and why).
//
// Sections: header dict parser (a Python literal) · header validation · reading · writing.
#include "dpscope/io/npy.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cstring>
#include <utility>
#include <vector>

#include "dpscope/base/atomic_file.hpp"
#include "io/byte_source.hpp"
#include "io/tensor_bytes.hpp"

namespace dpscope {

static_assert(std::endian::native == std::endian::little,
              "dpscope's file readers assume a little-endian host");

namespace {

using io_detail::ByteSource;
using io_detail::printable;

constexpr std::string_view kMagic{"\x93NUMPY", 6};
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 20;  // NumPy's own headers are < 100 bytes for our dtypes
constexpr uint64_t kArrayAlign = 64;                     // numpy.lib.format.ARRAY_ALIGN

[[noreturn]] void fail(const std::string& file, const std::string& reason) {
  throw Error(ErrorKind::kFormat, fmt::format("{}: {}", file, reason));
}

// "(3, 4)", "(3,)", "()": a shape the way the .npy header (and a Python user) writes it.
std::string python_tuple(const Shape& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

// ---------------------------------------------------------------------------------------------
// Header dict parser. The header is a Python literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// Values we understand: strings, True/False/None, integers and tuples of integers; a list (the
// descr of a structured dtype) is recognised only to be refused with a clear message.

struct PyValue {
  enum class Kind { kString, kBool, kNone, kInt, kTuple, kList };
  Kind kind = Kind::kNone;
  std::string text;           // kString: the content
  std::string source;         // the literal as written, for messages
  bool boolean = false;       // kBool
  int64_t integer = 0;        // kInt
  std::vector<int64_t> ints;  // kTuple
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  std::vector<std::pair<std::string, PyValue>> parse_dict() {
    std::vector<std::pair<std::string, PyValue>> entries;
    skip_space();
    expect('{', "'{' (the header must be a Python dict)");
    skip_space();
    while (peek() != '}') {
      if (peek() != '\'' && peek() != '"') syntax_error("a quoted key or '}'");
      std::string key = parse_string();
      skip_space();
      expect(':', fmt::format("':' after key '{}'", printable(key)));
      skip_space();
      PyValue value = parse_value();
      entries.emplace_back(std::move(key), std::move(value));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
      } else if (peek() != '}') {
        syntax_error("',' or '}'");
      }
    }
    ++pos_;  // '}'
    skip_space();
    if (pos_ != text_.size()) syntax_error("the end of the header after the dict");
    return entries;
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= text_.size(); }

  void skip_space() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  void expect(char c, const std::string& what) {
    if (peek() != c || at_end()) syntax_error(what);
    ++pos_;
  }

  [[noreturn]] void syntax_error(const std::string& expected) const {
    const std::string found = at_end() ? std::string("the end of the header")
                                       : fmt::format("'{}'", printable(text_.substr(pos_, 1)));
    fail(file_, fmt::format("header is not a valid Python dict literal: expected {} at column {}, found {}",
                            expected, pos_ + 1, found));
  }

  std::string parse_string() {
    const char quote = text_[pos_++];
    std::string out;
    while (!at_end() && peek() != quote) {
      if (peek() == '\\') syntax_error("a string without escape sequences");
      out.push_back(text_[pos_++]);
    }
    if (at_end()) syntax_error(fmt::format("a closing {} quote", quote));
    ++pos_;
    return out;
  }

  // A decimal integer, optionally signed, with Python 2's 'L' suffix tolerated (old version 1.0 files).
  int64_t parse_int() {
    const size_t start = pos_;
    bool negative = false;
    if (peek() == '-' || peek() == '+') negative = text_[pos_++] == '-';
    if (!(peek() >= '0' && peek() <= '9')) syntax_error("an integer");
    constexpr uint64_t kLimit = uint64_t{1} << 62;
    uint64_t value = 0;
    while (peek() >= '0' && peek() <= '9' && !at_end()) {
      if (value > kLimit / 10)
        fail(file_, fmt::format("header integer at column {} is too large", start + 1));
      value = value * 10 + static_cast<uint64_t>(text_[pos_++] - '0');
    }
    if (value > kLimit) fail(file_, fmt::format("header integer at column {} is too large", start + 1));
    if (peek() == 'L' || peek() == 'l') ++pos_;
    return negative ? -static_cast<int64_t>(value) : static_cast<int64_t>(value);
  }

  PyValue parse_value() {
    const size_t start = pos_;
    PyValue v;
    const char c = peek();
    if (c == '\'' || c == '"') {
      v.kind = PyValue::Kind::kString;
      v.text = parse_string();
    } else if (c == '(') {
      parse_tuple(v);
    } else if (c == '[') {
      skip_list();
      v.kind = PyValue::Kind::kList;
    } else if (c == '-' || c == '+' || (c >= '0' && c <= '9')) {
      v.kind = PyValue::Kind::kInt;
      v.integer = parse_int();
    } else if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_') {
      size_t end = pos_;
      while (end < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_'))
        ++end;
      const std::string_view name = text_.substr(pos_, end - pos_);
      if (name == "True" || name == "False") {
        v.kind = PyValue::Kind::kBool;
        v.boolean = name == "True";
      } else if (name == "None") {
        v.kind = PyValue::Kind::kNone;
      } else {
        syntax_error("a value (a string, True, False, None, an integer or a tuple)");
      }
      pos_ = end;
    } else {
      syntax_error("a value (a string, True, False, None, an integer or a tuple)");
    }
    v.source = std::string(text_.substr(start, pos_ - start));
    return v;
  }

  // "(3, 4)", "(3,)", "()"; "(3)" is Python's parenthesised integer 3, not a tuple.
  void parse_tuple(PyValue& v) {
    ++pos_;  // '('
    skip_space();
    v.kind = PyValue::Kind::kTuple;
    bool saw_comma = false;
    while (peek() != ')') {
      v.ints.push_back(parse_int());
      skip_space();
      if (peek() == ',') {
        saw_comma = true;
        ++pos_;
        skip_space();
      } else if (peek() != ')') {
        syntax_error("',' or ')' in a tuple of integers");
      }
    }
    ++pos_;  // ')'
    if (v.ints.size() == 1 && !saw_comma) {
      v.kind = PyValue::Kind::kInt;
      v.integer = v.ints[0];
      v.ints.clear();
    }
  }

  // Skips a (possibly nested) list, honouring quoted strings; its content is never used.
  void skip_list() {
    int depth = 0;
    do {
      const char c = peek();
      if (at_end()) syntax_error("a closing ']'");
      if (c == '\'' || c == '"') {
        parse_string();
        continue;
      }
      if (c == '[' || c == '(') ++depth;
      if (c == ']' || c == ')') --depth;
      ++pos_;
    } while (depth > 0);
  }

  std::string_view text_;
  const std::string& file_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Header validation

// NumPy names for the type codes users meet most, to make the refusal self-explanatory.
std::string numpy_type_name(std::string_view code) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 17> kNames{{
      {"f2", "float16"},
      {"f4", "float32"},
      {"f8", "float64"},
      {"f16", "longdouble"},
      {"i1", "int8"},
      {"i2", "int16"},
      {"i4", "int32"},
      {"i8", "int64"},
      {"u1", "uint8"},
      {"u2", "uint16"},
      {"u4", "uint32"},
      {"u8", "uint64"},
      {"b1", "bool"},
      {"c8", "complex64"},
      {"c16", "complex128"},
      {"M8", "datetime64"},
      {"m8", "timedelta64"},
  }};
  for (const auto& [c, name] : kNames)
    if (code.starts_with(c) && (code.size() == c.size() || code[c.size()] == '[')) return std::string(name);
  if (code.starts_with("U")) return "unicode string";
  if (code.starts_with("S")) return "byte string";
  if (code.starts_with("V")) return "void";
  return "";
}

DType parse_descr(const PyValue& descr, const std::string& file) {
  if (descr.kind == PyValue::Kind::kList)
    fail(file, "structured arrays (a list in 'descr') are not supported; save one plain array per file");
  if (descr.kind != PyValue::Kind::kString)
    fail(file, fmt::format("'descr' must be a dtype string such as '<f4', got {}", printable(descr.source)));
  const std::string d = printable(descr.text);
  if (d.find('O') != std::string::npos)
    fail(file,
         fmt::format("object arrays (descr '{}') are not supported: they hold pickled Python objects", d));
  const char order = d.empty() ? '\0' : d[0];
  const bool has_order = order == '<' || order == '>' || order == '|' || order == '=';
  const std::string code = has_order ? d.substr(1) : d;
  const std::string name = numpy_type_name(code);
  const bool ours = code == "f4" || code == "i8";
  if (ours && order == '>')
    fail(file,
         fmt::format("big-endian data (descr '{}') is not supported; save a.astype('<{}') instead", d, code));
  if (ours) return code == "f4" ? DType::kF32 : DType::kI64;  // '<', '=', '|' or no mark: little-endian here
  fail(file,
       fmt::format("dtype '{}'{} is not supported; dpscope reads float32 ('<f4') and int64 ('<i8') arrays, "
                   "e.g. np.save(path, a.astype(np.float32))",
                   d, name.empty() ? "" : fmt::format(" ({})", name)));
}

// Parses and checks the header dict; fills dtype and shape.
void parse_header_dict(std::string_view text, const std::string& file, NpyHeader& header) {
  const auto entries = HeaderParser(text, file).parse_dict();
  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (const auto& [key, value] : entries) {
    const PyValue** slot = key == "descr"           ? &descr
                           : key == "fortran_order" ? &fortran
                           : key == "shape"         ? &shape
                                                    : nullptr;
    if (slot == nullptr)
      fail(file, fmt::format(
                     "header has an unexpected key '{}' (expected exactly 'descr', 'fortran_order', 'shape')",
                     printable(key)));
    if (*slot != nullptr) fail(file, fmt::format("header has the key '{}' twice", printable(key)));
    *slot = &value;
  }
  for (const auto& [slot, key] : {std::pair{descr, "descr"}, {fortran, "fortran_order"}, {shape, "shape"}})
    if (slot == nullptr) fail(file, fmt::format("header lacks the key '{}'", key));

  header.dtype = parse_descr(*descr, file);
  if (shape->kind != PyValue::Kind::kTuple)
    fail(file, fmt::format("'shape' must be a tuple of integers, got {}{}", printable(shape->source),
                           shape->kind == PyValue::Kind::kInt ? " (a 1-D shape is written (N,))" : ""));
  for (int64_t d : shape->ints)
    if (d < 0) fail(file, fmt::format("'shape' {} has a negative dimension", printable(shape->source)));
  header.shape = shape->ints;
  if (fortran->kind != PyValue::Kind::kBool)
    fail(file, fmt::format("'fortran_order' must be True or False, got {}", printable(fortran->source)));
  const auto dims_over_one =
      std::count_if(header.shape.begin(), header.shape.end(), [](int64_t d) { return d > 1; });
  if (fortran->boolean && dims_over_one > 1)
    fail(file, fmt::format("Fortran-order (column-major) array of shape {} is not supported; "
                           "save np.ascontiguousarray(a) instead",
                           python_tuple(header.shape)));
}

// Reads and validates the preamble and header of `src`.
NpyHeader read_header(const ByteSource& src) {
  const std::string& file = src.name();
  const uint64_t size = src.size_bytes();
  std::array<unsigned char, 12> pre{};
  src.read_at(0, pre.data(), std::min<uint64_t>(size, pre.size()));
  if (size < kMagic.size() || std::memcmp(pre.data(), kMagic.data(), kMagic.size()) != 0)
    fail(file, "not a .npy file: it does not start with the magic string \\x93NUMPY");
  if (size < 8) fail(file, "truncated header: the file ends inside the version bytes");
  NpyHeader header;
  header.major_version = pre[6];
  const int minor = pre[7];
  if (!(header.major_version >= 1 && header.major_version <= 3) || minor != 0)
    fail(file, fmt::format("unsupported .npy format version {}.{} (dpscope reads 1.0, 2.0 and 3.0)",
                           header.major_version, minor));
  const uint64_t length_field_bytes = header.major_version == 1 ? 2 : 4;
  const uint64_t preamble_bytes = 8 + length_field_bytes;
  if (size < preamble_bytes) fail(file, "truncated header: the file ends inside the header length");
  uint64_t header_len = 0;
  for (uint64_t i = 0; i < length_field_bytes; ++i) header_len |= uint64_t{pre[8 + i]} << (8 * i);
  if (header_len > kMaxHeaderBytes)
    fail(file,
         fmt::format("header length {} bytes is implausible (over {} bytes)", header_len, kMaxHeaderBytes));
  if (header_len > size - preamble_bytes)
    fail(file, fmt::format("truncated header: it should be {} bytes but the file ends after {}", header_len,
                           size - preamble_bytes));
  std::string text(header_len, '\0');
  src.read_at(preamble_bytes, text.data(), header_len);
  parse_header_dict(text, file, header);

  header.data_offset_bytes = preamble_bytes + header_len;
  uint64_t numel = 1;
  for (int64_t d : header.shape)
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel))
      fail(file, fmt::format("shape {} is too large", python_tuple(header.shape)));
  if (__builtin_mul_overflow(numel, element_size(header.dtype), &header.data_size_bytes))
    fail(file, fmt::format("shape {} is too large", python_tuple(header.shape)));
  const uint64_t available = size - header.data_offset_bytes;
  if (available < header.data_size_bytes)
    fail(file,
         fmt::format("truncated data: shape {} {} needs {} bytes after the header but the file has {}",
                     python_tuple(header.shape), to_string(header.dtype), header.data_size_bytes, available));
  if (available > header.data_size_bytes)
    fail(file, fmt::format("trailing garbage: {} bytes after the {} bytes of data of shape {} {}",
                           available - header.data_size_bytes, header.data_size_bytes,
                           python_tuple(header.shape), to_string(header.dtype)));
  return header;
}

Tensor read_array(const ByteSource& src, const Device& device, MemoryCategory category) {
  const NpyHeader header = read_header(src);
  Tensor t = Tensor::empty(header.shape, device, category, header.dtype);
  if (header.data_size_bytes > 0)
    src.read_at(header.data_offset_bytes, io_detail::tensor_bytes(t), header.data_size_bytes);
  return t;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Reading

NpyHeader read_npy_header(const std::filesystem::path& path) {
  return read_header(io_detail::FileByteSource(path));
}

Tensor load_npy(const std::filesystem::path& path, const Device& device, MemoryCategory category) {
  return read_array(io_detail::FileByteSource(path), device, category);
}

Tensor load_npy_bytes(std::string_view bytes, const std::string& source_name, const Device& device,
                      MemoryCategory category) {
  return read_array(io_detail::MemoryByteSource(bytes, source_name), device, category);
}

// ---------------------------------------------------------------------------------------------
// Writing

std::string encode_npy_header(DType dtype, const Shape& shape) {
  // The dict text and padding follow numpy.lib.format (1.24) byte for byte, so np.save and
  // save_npy produce identical files: padding of 1..64 spaces, then '\n', up to a multiple of 64.
  const std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                       dtype == DType::kF32 ? "<f4" : "<i8", python_tuple(shape));
  std::string out;
  for (const uint64_t length_field_bytes : {uint64_t{2}, uint64_t{4}}) {
    const uint64_t preamble_bytes = 8 + length_field_bytes;
    const uint64_t hlen = dict.size() + 1;  // + '\n'
    const uint64_t pad = kArrayAlign - (preamble_bytes + hlen) % kArrayAlign;
    const uint64_t header_len = hlen + pad;
    if (length_field_bytes == 2 && header_len > 0xFFFF) continue;  // needs version 2.0
    out.assign(kMagic);
    out.push_back(static_cast<char>(length_field_bytes == 2 ? 1 : 2));
    out.push_back('\0');
    for (uint64_t i = 0; i < length_field_bytes; ++i)
      out.push_back(static_cast<char>((header_len >> (8 * i)) & 0xFF));
    out += dict;
    out.append(pad, ' ');
    out.push_back('\n');
    break;
  }
  return out;
}

void save_npy(const std::filesystem::path& path, const Tensor& tensor) {
  io_detail::check_saveable(tensor, path.string(), "the tensor");
  const std::string header = encode_npy_header(tensor.dtype(), tensor.shape());
  AtomicFileWriter out(path);
  out.write(header);
  if (tensor.nbytes() > 0) out.write(io_detail::tensor_bytes(tensor), tensor.nbytes());
  out.commit();
}

}  // namespace dpscope
