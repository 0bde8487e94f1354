// .npy files: round trips, NumPy's exact header bytes, header dialects, every refusal with its
// message, and files written by numpy itself (skipped without numpy).
#include "dpscope/io/npy.hpp"

#include <gtest/gtest.h>

#include "runtime/io/io_test_util.hpp"

namespace dpscope {
namespace {

using testing::le_bytes;
using testing::raw_bytes;
using testing::TempDir;
using testing::write_bytes;

// A .npy file with a literal header text (no padding added) and raw data, for malformed inputs.
std::string npy_file(std::string_view header, std::string_view data, int major = 1, int minor = 0) {
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back(static_cast<char>(minor));
  out += le_bytes(header.size(), major == 1 ? 2 : 4);
  out += header;
  out += data;
  return out;
}

const std::string kF32Data = raw_bytes<float>({1.5f, -2.f, 3.f, 0.25f, 5.f, 6.f});  // 2 x 3

class NpyTest : public ::testing::Test {
 protected:
  // Writes `bytes` to DIR/name and returns the path.
  std::filesystem::path file(const std::string& name, std::string_view bytes) {
    const auto path = dir_.path() / name;
    write_bytes(path, bytes);
    return path;
  }
  // Expects loading `bytes` to fail with kFormat "PATH: reason".
  void expect_refused(std::string_view bytes, const std::string& reason) {
    const auto path = file("bad.npy", bytes);
    EXPECT_DPS_ERROR(load_npy(path), ErrorKind::kFormat, path.string() + ": " + reason);
  }
  TempDir dir_;
};

TEST_F(NpyTest, Float32RoundTripKeepsShapeAndValues) {
  const std::vector<float> values{1.5f, -2.f, 3.f, 0.25f, 5.f, 6.f};
  save_npy(dir_.path() / "x.npy", Tensor::from_floats(values, {2, 3}));
  const Tensor t = load_npy(dir_.path() / "x.npy");
  EXPECT_EQ(t.dtype(), DType::kF32);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.to_vector(), values);
  EXPECT_EQ(t.category(), MemoryCategory::kBuffers);
  EXPECT_EQ(t.device(), Device::cpu());
}

TEST_F(NpyTest, Int64RoundTripKeepsFullRange) {
  const std::vector<int64_t> values{0, -1, int64_t{1} << 40, INT64_MIN, INT64_MAX};
  save_npy(dir_.path() / "y.npy", Tensor::from_ints(values, {5}));
  const Tensor t = load_npy(dir_.path() / "y.npy");
  EXPECT_EQ(t.dtype(), DType::kI64);
  EXPECT_EQ(t.shape(), (Shape{5}));
  EXPECT_EQ(t.to_ints(), values);
}

TEST_F(NpyTest, ZeroDimensionalArrayRoundTrips) {
  save_npy(dir_.path() / "s.npy", Tensor::from_floats(std::vector<float>{42.f}, {}));
  const Tensor t = load_npy(dir_.path() / "s.npy");
  EXPECT_EQ(t.shape(), Shape{});
  EXPECT_EQ(t.item(), 42.f);
  EXPECT_NE(testing::read_bytes(dir_.path() / "s.npy").find("'shape': (), }"), std::string::npos);
}

TEST_F(NpyTest, EmptyArrayRoundTrips) {
  save_npy(dir_.path() / "e.npy", Tensor::zeros({0, 3}));
  const Tensor t = load_npy(dir_.path() / "e.npy");
  EXPECT_EQ(t.shape(), (Shape{0, 3}));
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(std::filesystem::file_size(dir_.path() / "e.npy"), 128u);  // header only
}

TEST_F(NpyTest, HeaderIsNumpysTextPaddedToAMultipleOf64Bytes) {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  // 10-byte preamble + 59-byte dict + 58 spaces + '\n' = 128.
  EXPECT_EQ(encode_npy_header(DType::kF32, {2, 3}),
            std::string("\x93NUMPY\x01\x00", 8) + le_bytes(118, 2) + dict + std::string(58, ' ') + "\n");
  const std::string one_d = encode_npy_header(DType::kI64, {7});
  EXPECT_EQ(one_d.size(), 128u);  // 10 + 57 + 1 = 68 bytes round up to 128
  EXPECT_EQ(one_d.substr(10, 57), "{'descr': '<i8', 'fortran_order': False, 'shape': (7,), }");
  EXPECT_EQ(one_d.back(), '\n');
}

TEST_F(NpyTest, LoadsOntoASimulatedDeviceUnderTheGivenCategory) {
  const Device gpu = Device::sim(0, testing::test_preset());
  save_npy(dir_.path() / "x.npy", Tensor::from_floats(std::vector<float>{1.f, 2.f}, {2}));
  const Tensor t = load_npy(dir_.path() / "x.npy", gpu, MemoryCategory::kParameters);
  EXPECT_EQ(t.device(), gpu);
  EXPECT_EQ(gpu.memory().bytes[static_cast<int>(MemoryCategory::kParameters)], 8u);
  EXPECT_EQ(t.to_vector(), (std::vector<float>{1.f, 2.f}));
}

TEST_F(NpyTest, ReadsVersions2And3WithFourByteHeaderLength) {
  for (int major : {2, 3}) {
    const auto path = file(
        "v.npy", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", kF32Data, major));
    const NpyHeader header = read_npy_header(path);
    EXPECT_EQ(header.major_version, major);
    EXPECT_EQ(header.data_offset_bytes, 12u + 60u);
    EXPECT_EQ(load_npy(path).to_vector(), (std::vector<float>{1.5f, -2.f, 3.f, 0.25f, 5.f, 6.f}));
  }
}

TEST_F(NpyTest, AcceptsHeaderDialects) {
  const std::vector<std::string> dialects{
      "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}",             // any key order, no comma
      "{ \"descr\" : \"<f4\" ,\n 'fortran_order':False,'shape':( 2 ,3 , ) }",  // spacing, quotes, tuple comma
      "{'descr': '|f4', 'fortran_order': False, 'shape': (2L, 3L), }",         // '|' order, Python 2 longs
      "{'descr': '=f4', 'fortran_order': False, 'shape': (2, 3)}\t\r\n   ",    // '=' (native) order
      "{'descr': 'f4', 'fortran_order': False, 'shape': (2, 3)}",              // no mark: native
  };
  for (const std::string& header : dialects) {
    SCOPED_TRACE(header);
    EXPECT_EQ(load_npy_bytes(npy_file(header, kF32Data), "mem").shape(), (Shape{2, 3}));
  }
}

TEST_F(NpyTest, AcceptsFortranOrderWhereTheLayoutIsTheSame) {
  const Tensor t = load_npy_bytes(
      npy_file("{'descr': '<i8', 'fortran_order': True, 'shape': (1, 2, 1), }", raw_bytes<int64_t>({7, 9})),
      "mem");
  EXPECT_EQ(t.to_ints(), (std::vector<int64_t>{7, 9}));
}

// ---- refusals ----

TEST_F(NpyTest, MissingFileIsAnIoError) {
  const auto path = dir_.path() / "missing.npy";
  EXPECT_DPS_ERROR(load_npy(path), ErrorKind::kIo, "cannot read '" + path.string() + "': no such file");
}

TEST_F(NpyTest, DirectoryIsAnIoError) {
  EXPECT_DPS_ERROR(load_npy(dir_.path()), ErrorKind::kIo,
                   "cannot read '" + dir_.path().string() + "': is a directory");
}

TEST_F(NpyTest, RefusesBadMagic) {
  const std::string reason = "not a .npy file: it does not start with the magic string \\x93NUMPY";
  expect_refused("PK\x03\x04 this is a zip archive", reason);
  expect_refused("", reason);
  expect_refused("\x93NUM", reason);
}

TEST_F(NpyTest, RefusesUnknownVersions) {
  expect_refused(npy_file("{}", "", 4, 0),
                 "unsupported .npy format version 4.0 (dpscope reads 1.0, 2.0 and 3.0)");
  expect_refused(npy_file("{}", "", 1, 1),
                 "unsupported .npy format version 1.1 (dpscope reads 1.0, 2.0 and 3.0)");
}

TEST_F(NpyTest, RefusesTruncatedHeaders) {
  expect_refused(std::string("\x93NUMPY\x01", 7), "truncated header: the file ends inside the version bytes");
  expect_refused(std::string("\x93NUMPY\x02\x00\x10\x00", 10),
                 "truncated header: the file ends inside the header length");
  const std::string full = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", kF32Data);
  expect_refused(full.substr(0, 30), "truncated header: it should be 59 bytes but the file ends after 20");
}

TEST_F(NpyTest, RefusesAnImplausibleHeaderLength) {
  expect_refused(std::string("\x93NUMPY\x02\x00", 8) + le_bytes(0x7FFFFFFF, 4) + "{",
                 "header length 2147483647 bytes is implausible (over 1048576 bytes)");
}

TEST_F(NpyTest, RefusesAHeaderThatIsNotADict) {
  expect_refused(
      npy_file("['descr', '<f4']", ""),
      "header is not a valid Python dict literal: expected '{' (the header must be a Python dict) at "
      "column 1, found '['");
  expect_refused(
      npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} x", kF32Data),
      "header is not a valid Python dict literal: expected the end of the header after the dict at "
      "column 59, found 'x'");
  expect_refused(npy_file("{'descr': '<f4' 'shape': (2,)}", ""),
                 "header is not a valid Python dict literal: expected ',' or '}' at column 17, found '''");
  expect_refused(
      npy_file("{'descr: '<f4'}", ""),
      "header is not a valid Python dict literal: expected ':' after key 'descr: ' at column 11, found '<'");
  expect_refused(
      npy_file("{'descr': '<f4", ""),
      "header is not a valid Python dict literal: expected a closing ' quote at column 15, found the end "
      "of the header");
  expect_refused(
      npy_file("{'descr': 'a\\'b'}", ""),
      "header is not a valid Python dict literal: expected a string without escape sequences at column "
      "13, found '\\'");
  expect_refused(
      npy_file("{'descr': <f4}", ""),
      "header is not a valid Python dict literal: expected a value (a string, True, False, None, an "
      "integer or a tuple) at column 11, found '<'");
  expect_refused(npy_file("{'shape': (2, 'a')}", ""),
                 "header is not a valid Python dict literal: expected an integer at column 15, found '''");
}

TEST_F(NpyTest, RefusesMissingExtraAndDuplicateKeys) {
  expect_refused(npy_file("{'descr': '<f4', 'fortran_order': False}", ""), "header lacks the key 'shape'");
  expect_refused(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}", ""),
                 "header has an unexpected key 'extra' (expected exactly 'descr', 'fortran_order', 'shape')");
  expect_refused(npy_file("{'descr': '<f4', 'descr': '<i8', 'fortran_order': False, 'shape': ()}", ""),
                 "header has the key 'descr' twice");
}

TEST_F(NpyTest, RefusesFortranOrderArrays) {
  expect_refused(npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", kF32Data),
                 "Fortran-order (column-major) array of shape (2, 3) is not supported; save "
                 "np.ascontiguousarray(a) instead");
  expect_refused(npy_file("{'descr': '<f4', 'fortran_order': 'no', 'shape': (2, 3), }", kF32Data),
                 "'fortran_order' must be True or False, got 'no'");
}

TEST_F(NpyTest, RefusesBigEndianAndOtherDtypes) {
  const auto with_descr = [](const std::string& descr) {
    return npy_file("{'descr': " + descr + ", 'fortran_order': False, 'shape': (1,), }",
                    std::string(8, '\0'));
  };
  expect_refused(with_descr("'>f4'"),
                 "big-endian data (descr '>f4') is not supported; save a.astype('<f4') instead");
  expect_refused(with_descr("'>i8'"),
                 "big-endian data (descr '>i8') is not supported; save a.astype('<i8') instead");
  expect_refused(
      with_descr("'<f8'"),
      "dtype '<f8' (float64) is not supported; dpscope reads float32 ('<f4') and int64 ('<i8') arrays, "
      "e.g. np.save(path, a.astype(np.float32))");
  expect_refused(
      with_descr("'<i4'"),
      "dtype '<i4' (int32) is not supported; dpscope reads float32 ('<f4') and int64 ('<i8') arrays, "
      "e.g. np.save(path, a.astype(np.float32))");
  expect_refused(
      with_descr("'|b1'"),
      "dtype '|b1' (bool) is not supported; dpscope reads float32 ('<f4') and int64 ('<i8') arrays, "
      "e.g. np.save(path, a.astype(np.float32))");
  expect_refused(with_descr("'|O'"),
                 "object arrays (descr '|O') are not supported: they hold pickled Python objects");
  expect_refused(with_descr("[('x', '<f4'), ('y', '<f4')]"),
                 "structured arrays (a list in 'descr') are not supported; save one plain array per file");
  expect_refused(with_descr("4"), "'descr' must be a dtype string such as '<f4', got 4");
}

TEST_F(NpyTest, RefusesBadShapes) {
  const auto with_shape = [](const std::string& shape) {
    return npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + "}", "");
  };
  expect_refused(with_shape("(3)"),
                 "'shape' must be a tuple of integers, got (3) (a 1-D shape is written (N,))");
  expect_refused(with_shape("[3]"), "'shape' must be a tuple of integers, got [3]");
  expect_refused(with_shape("(-1, 3)"), "'shape' (-1, 3) has a negative dimension");
  expect_refused(with_shape("(4611686018427387904, 4611686018427387904)"),
                 "shape (4611686018427387904, 4611686018427387904) is too large");
  expect_refused(with_shape("(99999999999999999999,)"), "header integer at column 52 is too large");
}

TEST_F(NpyTest, RefusesDataThatDisagreesWithTheShape) {
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  expect_refused(npy_file(header, kF32Data.substr(0, 20)),
                 "truncated data: shape (2, 3) float32 needs 24 bytes after the header but the file has 20");
  expect_refused(npy_file(header, kF32Data + "junk"),
                 "trailing garbage: 4 bytes after the 24 bytes of data of shape (2, 3) float32");
}

TEST_F(NpyTest, MessagesShowControlAndNonAsciiBytesEscaped) {
  expect_refused(
      npy_file("{'de\nscr': '<f4', 'fortran_order': False, 'shape': ()}", ""),
      "header has an unexpected key 'de\\x0ascr' (expected exactly 'descr', 'fortran_order', 'shape')");
  expect_refused(
      npy_file("{\x01}", ""),
      "header is not a valid Python dict literal: expected a quoted key or '}' at column 2, found '\\x01'");
  expect_refused(npy_file("{'descr': '<f\xe9', 'fortran_order': False, 'shape': ()}", ""),
                 "dtype '<f\\xe9' is not supported; dpscope reads float32 ('<f4') and int64 ('<i8') arrays, "
                 "e.g. np.save(path, a.astype(np.float32))");
}

TEST_F(NpyTest, InMemoryReaderNamesTheGivenSource) {
  EXPECT_DPS_ERROR(load_npy_bytes("nope", "archive.zip/x.npy"), ErrorKind::kFormat,
                   "archive.zip/x.npy: not a .npy file: it does not start with the magic string \\x93NUMPY");
}

// ---- writing ----

TEST_F(NpyTest, SaveRefusesTensorsWithoutData) {
  const auto path = dir_.path() / "x.npy";
  EXPECT_DPS_ERROR(save_npy(path, Tensor()), ErrorKind::kInvalidArgument,
                   path.string() + ": cannot save the tensor: it is an undefined tensor");
  const Device gpu = Device::sim(0, testing::test_preset());
  EXPECT_DPS_ERROR(
      save_npy(path, Tensor::meta({4, 4}, gpu)), ErrorKind::kUnsupported,
      path.string() + ": cannot save the tensor: shape [4, 4] on sim:0 has no data (timing-only mode)");
  EXPECT_TRUE(dir_.files().empty());
}

TEST_F(NpyTest, SaveIntoAMissingDirectoryIsAnIoError) {
  const auto path = dir_.path() / "no-such-dir" / "x.npy";
  EXPECT_DPS_ERROR(save_npy(path, Tensor::zeros({1})), ErrorKind::kIo,
                   path.string() + ": cannot create a file in '" + (dir_.path() / "no-such-dir").string() +
                       "': No such file or directory");
}

TEST_F(NpyTest, SaveReplacesAnExistingFileAndLeavesNoTemporaryFile) {
  write_bytes(dir_.path() / "x.npy", "old content");
  save_npy(dir_.path() / "x.npy", Tensor::full({3}, 2.f));
  EXPECT_EQ(load_npy(dir_.path() / "x.npy").to_vector(), (std::vector<float>{2.f, 2.f, 2.f}));
  EXPECT_EQ(dir_.files(), std::vector<std::string>{"x.npy"});
}

// ---- NumPy parity (skipped without numpy) ----

TEST_F(NpyTest, ReadsFilesWrittenByNumpy) {
  DPS_REQUIRE_PYTHON_MODULE("numpy");
  const auto result = testing::run_python(fmt::format(R"(
import numpy as np
from numpy.lib import format as fmt
d = '{}'
np.save(d + '/f32.npy', np.arange(12, dtype=np.float32).reshape(3, 4) / 4)
np.save(d + '/i64.npy', np.array([3, -1, 2**40], dtype=np.int64))
np.save(d + '/scalar.npy', np.float32(2.5))
np.save(d + '/empty.npy', np.zeros((0, 5), dtype=np.float32))
np.save(d + '/fortran1d.npy', np.asfortranarray(np.array([1.0, 2.0], dtype=np.float32)))
for v in [(2, 0), (3, 0)]:
    with open(d + '/v%d.npy' % v[0], 'wb') as f:
        fmt.write_array(f, np.array([[1, 2], [3, 4]], dtype=np.int64), version=v)
np.save(d + '/f64.npy', np.zeros(3))
np.save(d + '/fortran2d.npy', np.asfortranarray(np.ones((2, 3), dtype=np.float32)))
np.save(d + '/big.npy', np.zeros(2, dtype='>f4'))
)",
                                                      dir_.path().string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;

  const Tensor f32 = load_npy(dir_.path() / "f32.npy");
  EXPECT_EQ(f32.shape(), (Shape{3, 4}));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(f32.f32()[i], static_cast<float>(i) / 4.f);
  EXPECT_EQ(load_npy(dir_.path() / "i64.npy").to_ints(), (std::vector<int64_t>{3, -1, int64_t{1} << 40}));
  EXPECT_EQ(load_npy(dir_.path() / "scalar.npy").item(), 2.5f);
  EXPECT_EQ(load_npy(dir_.path() / "empty.npy").shape(), (Shape{0, 5}));
  EXPECT_EQ(load_npy(dir_.path() / "fortran1d.npy").to_vector(), (std::vector<float>{1.f, 2.f}));
  for (int major : {2, 3}) {
    const auto path = dir_.path() / fmt::format("v{}.npy", major);
    EXPECT_EQ(read_npy_header(path).major_version, major);
    EXPECT_EQ(load_npy(path).to_ints(), (std::vector<int64_t>{1, 2, 3, 4}));
  }
  EXPECT_THROW(load_npy(dir_.path() / "f64.npy"), Error);
  EXPECT_THROW(load_npy(dir_.path() / "fortran2d.npy"), Error);
  EXPECT_THROW(load_npy(dir_.path() / "big.npy"), Error);
}

TEST_F(NpyTest, WritesTheSameBytesAsNumpyAndNumpyReadsThem) {
  DPS_REQUIRE_PYTHON_MODULE("numpy");
  save_npy(dir_.path() / "ours_f32.npy",
           Tensor::from_floats(std::vector<float>{0.5f, -1.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}));
  save_npy(dir_.path() / "ours_i64.npy", Tensor::from_ints(std::vector<int64_t>{9, -9, 1}, {3}));
  save_npy(dir_.path() / "ours_scalar.npy", Tensor::from_floats(std::vector<float>{7.f}, {}));
  const auto result = testing::run_python(fmt::format(R"(
import numpy as np
d = '{}'
a = np.load(d + '/ours_f32.npy'); b = np.load(d + '/ours_i64.npy'); c = np.load(d + '/ours_scalar.npy')
assert a.dtype == np.float32 and a.shape == (2, 3) and a.tolist() == [[0.5, -1, 3], [4, 5, 6]], a
assert b.dtype == np.int64 and b.tolist() == [9, -9, 1], b
assert c.dtype == np.float32 and c.shape == () and float(c) == 7.0, c
np.save(d + '/np_f32.npy', a); np.save(d + '/np_i64.npy', b); np.save(d + '/np_scalar.npy', c)
print('ok')
)",
                                                      dir_.path().string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* name : {"f32", "i64", "scalar"})
    EXPECT_EQ(testing::read_bytes(dir_.path() / fmt::format("ours_{}.npy", name)),
              testing::read_bytes(dir_.path() / fmt::format("np_{}.npy", name)))
        << name;
}

}  // namespace
}  // namespace dpscope
