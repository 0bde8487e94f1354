// safetensors: round trips in the given order, the reference writer's exact bytes, every header
// validation with its message, and files read and written by Python (pure-Python reference reader
// and writer in the test; the real safetensors package too when it is installed).
#include "dpscope/io/safetensors.hpp"

#include <gtest/gtest.h>

#include "runtime/io/io_test_util.hpp"

namespace dpscope {
namespace {

using testing::le_bytes;
using testing::raw_bytes;
using testing::TempDir;
using testing::write_bytes;

// A safetensors file from a literal header (no padding added) and a raw buffer.
std::string st_file(std::string_view header, std::string_view buffer) {
  return le_bytes(header.size(), 8) + std::string(header) + std::string(buffer);
}

// {"NAME":{"dtype":"DTYPE","shape":SHAPE,"data_offsets":[B,E]}} without the braces.
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, uint64_t begin,
                  uint64_t end) {
  return fmt::format(R"("{}":{{"dtype":"{}","shape":{},"data_offsets":[{},{}]}})", name, dtype, shape, begin,
                     end);
}

class SafetensorsTest : public ::testing::Test {
 protected:
  std::filesystem::path file(const std::string& name, std::string_view bytes) {
    const auto path = dir_.path() / name;
    write_bytes(path, bytes);
    return path;
  }
  void expect_refused(std::string_view bytes, const std::string& reason) {
    const auto path = file("bad.safetensors", bytes);
    EXPECT_DPS_ERROR(load_safetensors(path), ErrorKind::kFormat, path.string() + ": " + reason);
  }
  TempDir dir_;
};

NamedTensors sample_tensors() {
  return {
      {"z.weight", Tensor::from_floats(std::vector<float>{1.f, -2.f, 0.5f, 4.f}, {2, 2})},
      {"a.bias", Tensor::from_ints(std::vector<int64_t>{7, -8, int64_t{1} << 50}, {3})},
      {"m", Tensor::from_floats(std::vector<float>{3.25f}, {})},
      {"empty", Tensor::zeros({0, 4})},
  };
}

TEST_F(SafetensorsTest, RoundTripKeepsOrderShapesValuesAndMetadata) {
  const auto path = dir_.path() / "w.safetensors";
  save_safetensors(path, sample_tensors(), {{"format", "pt"}, {"note", "dpscope"}});
  const NamedTensors loaded = load_safetensors(path);
  ASSERT_EQ(loaded.size(), 4u);
  EXPECT_EQ(loaded[0].first, "z.weight");
  EXPECT_EQ(loaded[1].first, "a.bias");
  EXPECT_EQ(loaded[2].first, "m");
  EXPECT_EQ(loaded[3].first, "empty");
  EXPECT_EQ(loaded[0].second.shape(), (Shape{2, 2}));
  EXPECT_EQ(loaded[0].second.to_vector(), (std::vector<float>{1.f, -2.f, 0.5f, 4.f}));
  EXPECT_EQ(loaded[1].second.to_ints(), (std::vector<int64_t>{7, -8, int64_t{1} << 50}));
  EXPECT_EQ(loaded[2].second.shape(), Shape{});
  EXPECT_EQ(loaded[2].second.item(), 3.25f);
  EXPECT_EQ(loaded[3].second.shape(), (Shape{0, 4}));
  EXPECT_EQ(loaded[0].second.category(), MemoryCategory::kParameters);
  EXPECT_EQ(read_safetensors_metadata(path), (SafetensorsMetadata{{"format", "pt"}, {"note", "dpscope"}}));
}

TEST_F(SafetensorsTest, HeaderDescribesBackToBackTensors) {
  const auto path = dir_.path() / "w.safetensors";
  save_safetensors(path, sample_tensors());
  const SafetensorsHeader header = read_safetensors_header(path);
  ASSERT_EQ(header.entries.size(), 4u);
  EXPECT_EQ(header.entries[0].begin_bytes, 0u);
  EXPECT_EQ(header.entries[0].end_bytes, 16u);
  EXPECT_EQ(header.entries[1].begin_bytes, 16u);
  EXPECT_EQ(header.entries[1].end_bytes, 40u);
  EXPECT_EQ(header.entries[1].dtype, DType::kI64);
  EXPECT_EQ(header.entries[2].end_bytes, 44u);
  EXPECT_EQ(header.entries[3].begin_bytes, 44u);
  EXPECT_EQ(header.entries[3].end_bytes, 44u);
  EXPECT_TRUE(header.metadata.empty());
  EXPECT_EQ(header.data_offset_bytes % 8, 0u);
  EXPECT_EQ(std::filesystem::file_size(path), header.data_offset_bytes + 44u);
}

TEST_F(SafetensorsTest, WritesTheReferenceLayoutByteForByte) {
  const auto path = dir_.path() / "w.safetensors";
  save_safetensors(path, {{"w", Tensor::from_floats(std::vector<float>{1.f, 2.f}, {2})}});
  // 54 bytes of compact JSON, padded with 2 spaces to 56, then the 8 data bytes.
  const std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(testing::read_bytes(path), le_bytes(56, 8) + header + "  " + raw_bytes<float>({1.f, 2.f}));
}

TEST_F(SafetensorsTest, MetadataComesFirstInTheHeader) {
  const auto path = dir_.path() / "w.safetensors";
  save_safetensors(path, {{"b", Tensor::zeros({1})}}, {{"format", "pt"}});
  const std::string bytes = testing::read_bytes(path);
  EXPECT_TRUE(
      bytes.substr(8).starts_with(R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[1],)"))
      << bytes.substr(8);
}

TEST_F(SafetensorsTest, LoadsOntoASimulatedDevice) {
  const Device gpu = Device::sim(0, testing::test_preset());
  save_safetensors(dir_.path() / "w.safetensors", sample_tensors());
  const NamedTensors loaded =
      load_safetensors(dir_.path() / "w.safetensors", gpu, MemoryCategory::kOptimizerState);
  EXPECT_EQ(loaded[0].second.device(), gpu);
  EXPECT_EQ(gpu.memory().bytes[static_cast<int>(MemoryCategory::kOptimizerState)], 44u);
}

TEST_F(SafetensorsTest, FindTensorByName) {
  const NamedTensors tensors = sample_tensors();
  EXPECT_EQ(find_tensor(tensors, "m").item(), 3.25f);
  EXPECT_DPS_ERROR(find_tensor(tensors, "0.weight"), ErrorKind::kInvalidArgument,
                   "no tensor named '0.weight' (have: z.weight, a.bias, m, empty)");
}

TEST_F(SafetensorsTest, EmptyHeaderIsAValidFileWithNoTensors) {
  EXPECT_TRUE(load_safetensors(file("e.safetensors", st_file("{}      ", ""))).empty());
}

TEST_F(SafetensorsTest, TensorsMayBeStoredInAnyOrderInTheBuffer) {
  // Header order a, b; buffer order b, a. Loading keeps the header order.
  const std::string header =
      "{" + entry("a", "F32", "[1]", 8, 12) + "," + entry("b", "I64", "[1]", 0, 8) + "}";
  const NamedTensors t = load_safetensors(
      file("w.safetensors", st_file(header, raw_bytes<int64_t>({5}) + raw_bytes<float>({2.5f}))));
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].first, "a");
  EXPECT_EQ(t[0].second.item(), 2.5f);
  EXPECT_EQ(t[1].second.to_ints(), std::vector<int64_t>{5});
}

// ---- validation ----

TEST_F(SafetensorsTest, MissingFileIsAnIoError) {
  const auto path = dir_.path() / "missing.safetensors";
  EXPECT_DPS_ERROR(load_safetensors(path), ErrorKind::kIo,
                   "cannot read '" + path.string() + "': no such file");
}

TEST_F(SafetensorsTest, RefusesBadHeaderLengths) {
  expect_refused("abc", "too short to be a safetensors file (3 bytes; the header length alone takes 8)");
  expect_refused(le_bytes(100'000'001, 8) + "{}",
                 "header length 100000001 bytes is over the 100000000-byte limit (not a safetensors file?)");
  expect_refused(le_bytes(64, 8) + "{}",
                 "header length 64 bytes exceeds the 2 bytes that follow it (truncated file?)");
  expect_refused(st_file("[1, 2]", ""), "header does not start with '{' (not a safetensors file?)");
  expect_refused(st_file("", ""), "header does not start with '{' (not a safetensors file?)");
}

TEST_F(SafetensorsTest, RefusesInvalidJson) {
  expect_refused(
      st_file(R"({"a": {"dtype": "F32",)", ""),
      "header is not valid JSON: parse error at line 1, column 23: syntax error while parsing object key "
      "- unexpected end of input; expected string literal");
}

TEST_F(SafetensorsTest, RefusesDuplicateNamesAndKeys) {
  expect_refused(st_file("{" + entry("w", "F32", "[1]", 0, 4) + "," + entry("w", "F32", "[1]", 4, 8) + "}",
                         std::string(8, '\0')),
                 "duplicate tensor name 'w' in the header");
  expect_refused(st_file(R"({"w":{"dtype":"F32","dtype":"I64","shape":[1],"data_offsets":[0,4]}})",
                         std::string(4, '\0')),
                 "duplicate key 'dtype' in the header");
}

TEST_F(SafetensorsTest, RefusesIncompleteEntries) {
  expect_refused(st_file(R"({"w":[0,4]})", ""),
                 "tensor 'w' must be an object with dtype, shape and data_offsets");
  expect_refused(st_file(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0')),
                 "tensor 'w' lacks 'dtype'");
  expect_refused(st_file(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", std::string(4, '\0')),
                 "tensor 'w' lacks 'shape'");
  expect_refused(st_file(R"({"w":{"dtype":"F32","shape":[1]}})", std::string(4, '\0')),
                 "tensor 'w' lacks 'data_offsets'");
}

TEST_F(SafetensorsTest, RefusesUnsupportedAndUnknownDtypes) {
  expect_refused(
      st_file("{" + entry("0.weight", "F16", "[2]", 0, 4) + "}", std::string(4, '\0')),
      "tensor '0.weight' has dtype F16, which dpscope does not read (it reads F32 and I64); convert it "
      "before saving, e.g. t.float()");
  expect_refused(
      st_file("{" + entry("w", "BF16", "[2]", 0, 4) + "}", std::string(4, '\0')),
      "tensor 'w' has dtype BF16, which dpscope does not read (it reads F32 and I64); convert it before "
      "saving, e.g. t.float()");
  expect_refused(st_file("{" + entry("w", "Q7", "[2]", 0, 4) + "}", std::string(4, '\0')),
                 "tensor 'w' has an unknown dtype 'Q7'");
  expect_refused(st_file(R"({"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0')),
                 "tensor 'w': 'dtype' must be a string such as \"F32\"");
}

TEST_F(SafetensorsTest, RefusesBadShapesAndOffsets) {
  const std::string four(4, '\0');
  expect_refused(st_file("{" + entry("w", "F32", "[-1]", 0, 4) + "}", four),
                 "tensor 'w': 'shape' must be a list of non-negative integers");
  expect_refused(st_file("{" + entry("w", "F32", "[1.5]", 0, 4) + "}", four),
                 "tensor 'w': 'shape' must be a list of non-negative integers");
  expect_refused(st_file("{" + entry("w", "F32", "4", 0, 4) + "}", four),
                 "tensor 'w': 'shape' must be a list of non-negative integers");
  expect_refused(st_file("{" + entry("w", "F32", "[4294967296,4294967296,4294967296]", 0, 4) + "}", four),
                 "tensor 'w': shape [4294967296, 4294967296, 4294967296] is too large");
  expect_refused(st_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", four),
                 "tensor 'w': 'data_offsets' must be [begin, end], two non-negative integers");
  expect_refused(st_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", four),
                 "tensor 'w': 'data_offsets' must be [begin, end], two non-negative integers");
  expect_refused(st_file("{" + entry("w", "F32", "[0]", 8, 4) + "}", four),
                 "tensor 'w': data_offsets [8, 4] end before they begin");
  expect_refused(st_file("{" + entry("w", "F32", "[2, 3]", 0, 20) + "}", std::string(20, '\0')),
                 "tensor 'w': shape [2, 3] F32 needs 24 bytes but data_offsets [0, 20] span 20");
}

TEST_F(SafetensorsTest, RefusesOffsetsPastTheBuffer) {
  expect_refused(
      st_file("{" + entry("w", "F32", "[16]", 0, 64) + "}", std::string(48, '\0')),
      "tensor 'w': data_offsets [0, 64] reach past the end of the 48-byte data buffer (truncated file?)");
}

TEST_F(SafetensorsTest, RefusesOverlapsHolesAndTrailingData) {
  expect_refused(st_file("{" + entry("a", "F32", "[4]", 0, 16) + "," + entry("b", "F32", "[4]", 8, 24) + "}",
                         std::string(24, '\0')),
                 "tensors 'a' [0, 16) and 'b' [8, 24) overlap in the data buffer");
  expect_refused(st_file("{" + entry("a", "F32", "[4]", 0, 16) + "," + entry("b", "F32", "[2]", 24, 32) + "}",
                         std::string(32, '\0')),
                 "bytes [16, 24) of the data buffer belong to no tensor");
  expect_refused(st_file("{" + entry("a", "F32", "[2]", 8, 16) + "}", std::string(16, '\0')),
                 "bytes [0, 8) of the data buffer belong to no tensor");
  expect_refused(st_file("{" + entry("a", "F32", "[4]", 0, 16) + "}", std::string(24, '\0')),
                 "bytes [16, 24) of the data buffer belong to no tensor (trailing data)");
  expect_refused(st_file("{" + entry("a", "F32", "[4]", 0, 16) + "," + entry("z", "F32", "[0]", 8, 8) + "}",
                         std::string(16, '\0')),
                 "tensors 'a' [0, 16) and 'z' [8, 8) overlap in the data buffer");
}

TEST_F(SafetensorsTest, RefusesMalformedMetadata) {
  expect_refused(st_file(R"({"__metadata__":["pt"]})", ""),
                 "'__metadata__' must be an object mapping strings to strings");
  expect_refused(st_file(R"({"__metadata__":{"format":"pt","epoch":3}})", ""),
                 "'__metadata__' must map strings to strings, but 'epoch' is a number");
}

TEST_F(SafetensorsTest, MessagesShowControlBytesInNamesEscaped) {
  expect_refused(
      st_file("{" + entry("a\\nb", "F16", "[2]", 0, 4) + "}", std::string(4, '\0')),
      "tensor 'a\\x0ab' has dtype F16, which dpscope does not read (it reads F32 and I64); convert it "
      "before saving, e.g. t.float()");
}

TEST_F(SafetensorsTest, InMemoryReaderNamesTheGivenSource) {
  EXPECT_DPS_ERROR(load_safetensors_bytes("abc", "upload"), ErrorKind::kFormat,
                   "upload: too short to be a safetensors file (3 bytes; the header length alone takes 8)");
}

// ---- writer errors ----

TEST_F(SafetensorsTest, WriterRefusesBadNamesAndKeepsTheOldFile) {
  const auto path = dir_.path() / "w.safetensors";
  write_bytes(path, "previous checkpoint");
  const std::string p = path.string();
  const Tensor t = Tensor::zeros({1});
  EXPECT_DPS_ERROR(save_safetensors(path, {{"", t}}), ErrorKind::kInvalidArgument,
                   p + ": tensor names must not be empty");
  EXPECT_DPS_ERROR(save_safetensors(path, {{"__metadata__", t}}), ErrorKind::kInvalidArgument,
                   p + ": '__metadata__' is reserved for metadata, not a tensor name");
  EXPECT_DPS_ERROR(save_safetensors(path, {{"w", t}, {"w", t}}), ErrorKind::kInvalidArgument,
                   p + ": tensor name 'w' appears twice");
  EXPECT_DPS_ERROR(save_safetensors(path, {{"w", Tensor()}}), ErrorKind::kInvalidArgument,
                   p + ": cannot save tensor 'w': it is an undefined tensor");
  const Device gpu = Device::sim(0, testing::test_preset());
  EXPECT_DPS_ERROR(
      save_safetensors(path, {{"w", t}, {"big", Tensor::meta({1024, 1024}, gpu)}}), ErrorKind::kUnsupported,
      p + ": cannot save tensor 'big': shape [1024, 1024] on sim:0 has no data (timing-only mode)");
  EXPECT_DPS_ERROR(save_safetensors(path, {{"bad\xff", t}}), ErrorKind::kInvalidArgument,
                   p + ": a tensor name or metadata string is not valid UTF-8");
  EXPECT_EQ(testing::read_bytes(path), "previous checkpoint");
  EXPECT_EQ(dir_.files(), std::vector<std::string>{"w.safetensors"});
}

// ---- Python interoperability ----

// A reader written from the format description alone: checks the 8-byte padding, duplicate keys
// and exact tiling, then decodes F32/I64 with struct.
constexpr const char* kPythonReader = R"(
import json, struct
def load(path):
    data = open(path, 'rb').read()
    n = struct.unpack('<Q', data[:8])[0]
    assert n % 8 == 0, 'header length %d is not a multiple of 8' % n
    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)), keys
        return dict(pairs)
    header = json.loads(data[8:8 + n].decode('utf-8'), object_pairs_hook=no_duplicates)
    buf = data[8 + n:]
    meta = header.pop('__metadata__', {})
    pos = 0
    for b, e, k in sorted((v['data_offsets'][0], v['data_offsets'][1], k) for k, v in header.items()):
        assert b == pos, (k, b, pos)
        pos = e
    assert pos == len(buf), (pos, len(buf))
    out = {}
    for k, v in header.items():
        b, e = v['data_offsets']
        code = {'F32': 'f', 'I64': 'q'}[v['dtype']]
        out[k] = (v['dtype'], v['shape'], list(struct.unpack('<%d%s' % ((e - b) // struct.calcsize(code), code), buf[b:e])))
    return list(header.keys()), meta, out
)";

TEST_F(SafetensorsTest, PythonReferenceReaderReadsOurFiles) {
  if (testing::run_python("import json, struct\n").exit_code != 0)
    GTEST_SKIP() << "/usr/bin/python3 is not available";
  const auto path = dir_.path() / "ours.safetensors";
  save_safetensors(path, sample_tensors(), {{"format", "pt"}});
  const auto result = testing::run_python(std::string(kPythonReader) + fmt::format(R"(
names, meta, t = load('{}')
assert names == ['z.weight', 'a.bias', 'm', 'empty'], names
assert meta == {{'format': 'pt'}}, meta
assert t['z.weight'] == ('F32', [2, 2], [1.0, -2.0, 0.5, 4.0]), t
assert t['a.bias'] == ('I64', [3], [7, -8, 2**50]), t
assert t['m'] == ('F32', [], [3.25]), t
assert t['empty'] == ('F32', [0, 4], []), t
print('ok')
)",
                                                                                   path.string()));
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

TEST_F(SafetensorsTest, ReadsAFileWrittenLikeTheReferenceWriter) {
  if (testing::run_python("import json, struct\n").exit_code != 0)
    GTEST_SKIP() << "/usr/bin/python3 is not available";
  // The reference writer sorts by dtype (I64 before F32) then name, writes compact JSON with
  // __metadata__ first, and pads the header with spaces to a multiple of 8.
  const auto path = dir_.path() / "py.safetensors";
  const auto result = testing::run_python(fmt::format(R"(
import json, struct
tensors = [('c.b', 'F32', [2], struct.pack('<2f', 0.5, 1.5)),
           ('a.w', 'F32', [2, 2], struct.pack('<4f', 1, 2, 3, 4)),
           ('b.idx', 'I64', [3], struct.pack('<3q', 9, -9, 2**40))]
tensors.sort(key=lambda t: ({{'I64': 0, 'F32': 1}}[t[1]], t[0]))
header, offset = {{'__metadata__': {{'format': 'pt'}}}}, 0
for name, dtype, shape, data in tensors:
    header[name] = {{'dtype': dtype, 'shape': shape, 'data_offsets': [offset, offset + len(data)]}}
    offset += len(data)
text = json.dumps(header, separators=(',', ':')).encode()
text += b' ' * ((8 - len(text) % 8) % 8)
with open('{}', 'wb') as f:
    f.write(struct.pack('<Q', len(text)) + text + b''.join(t[3] for t in tensors))
)",
                                                      path.string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const NamedTensors t = load_safetensors(path);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].first, "b.idx");
  EXPECT_EQ(t[1].first, "a.w");
  EXPECT_EQ(t[2].first, "c.b");
  EXPECT_EQ(t[0].second.to_ints(), (std::vector<int64_t>{9, -9, int64_t{1} << 40}));
  EXPECT_EQ(t[1].second.shape(), (Shape{2, 2}));
  EXPECT_EQ(t[1].second.to_vector(), (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
  EXPECT_EQ(t[2].second.to_vector(), (std::vector<float>{0.5f, 1.5f}));
  EXPECT_EQ(read_safetensors_metadata(path), (SafetensorsMetadata{{"format", "pt"}}));
}

TEST_F(SafetensorsTest, InteroperatesWithTheSafetensorsPackage) {
  DPS_REQUIRE_PYTHON_MODULE("safetensors");
  DPS_REQUIRE_PYTHON_MODULE("torch");
  const auto ours = dir_.path() / "ours.safetensors";
  const auto theirs = dir_.path() / "theirs.safetensors";
  save_safetensors(ours, sample_tensors());
  const auto result = testing::run_python(fmt::format(R"(
import torch
from safetensors.torch import load_file, save_file
t = load_file('{}')
assert t['z.weight'].tolist() == [[1.0, -2.0], [0.5, 4.0]] and t['a.bias'].tolist() == [7, -8, 2**50], t
assert t['m'].shape == () and t['empty'].shape == (0, 4), t
save_file({{'0.weight': torch.arange(6, dtype=torch.float32).reshape(2, 3), '0.bias': torch.tensor([5], dtype=torch.int64)}}, '{}')
)",
                                                      ours.string(), theirs.string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const NamedTensors t = load_safetensors(theirs);
  EXPECT_EQ(find_tensor(t, "0.weight").to_vector(), (std::vector<float>{0.f, 1.f, 2.f, 3.f, 4.f, 5.f}));
  EXPECT_EQ(find_tensor(t, "0.bias").to_ints(), std::vector<int64_t>{5});
}

}  // namespace
}  // namespace dpscope
