// Tensors: factories, views, device copies, the PyTorch device-mismatch error, accounting.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "dpscope/core/tensor.hpp"
#include "dpscope/core/timing.hpp"

namespace dpscope {
namespace {

Device make_sim(int index = 0) { return Device::sim(index, find_preset("h100-sxm")); }

TEST(Tensor, ZerosHasShapeNumelAndBytes) {
  Tensor t = Tensor::zeros({2, 3});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  EXPECT_EQ(t.to_vector(), std::vector<float>(6, 0.0f));
}

TEST(Tensor, FromFloatsChecksCount) {
  const std::vector<float> v = {1, 2, 3};
  EXPECT_THROW(Tensor::from_floats(v, {2, 2}), Error);
  try {
    Tensor::from_floats(v, {2, 2});
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "from_floats: 3 values for shape [2, 2]");
  }
}

TEST(Tensor, RowsIsAViewSharingStorage) {
  const std::vector<float> v = {0, 1, 2, 3, 4, 5};
  Tensor t = Tensor::from_floats(v, {3, 2});
  Tensor r = t.rows(1, 2);
  EXPECT_EQ(r.shape(), (Shape{2, 2}));
  EXPECT_EQ(r.to_vector(), (std::vector<float>{2, 3, 4, 5}));
  r.f32()[0] = 42;
  EXPECT_EQ(t.to_vector()[2], 42);
  EXPECT_THROW(t.rows(2, 2), Error);
}

TEST(Tensor, ReshapeKeepsNumel) {
  Tensor t = Tensor::zeros({2, 3});
  EXPECT_EQ(t.reshape({3, 2}).shape(), (Shape{3, 2}));
  try {
    t.reshape({4});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot reshape [2, 3] into [4]");
  }
}

TEST(Tensor, Int64AccessAndDtypeCheck) {
  const std::vector<int64_t> v = {7, 8};
  Tensor t = Tensor::from_ints(v, {2});
  EXPECT_EQ(t.to_ints(), v);
  EXPECT_THROW(t.f32(), Error);
}

TEST(Tensor, ItemNeedsOneElement) {
  EXPECT_FLOAT_EQ(Tensor::full({1}, 2.5f).item(), 2.5f);
  EXPECT_THROW(Tensor::zeros({2}).item(), Error);
}

TEST(Tensor, DeviceMismatchIsWordedLikePyTorch) {
  Device sim = make_sim();
  Tensor a = Tensor::zeros({2}, sim);
  Tensor b = Tensor::zeros({2});
  try {
    check_same_device(a, b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDevice);
    EXPECT_STREQ(
        e.what(),
        "Expected all tensors to be on the same device, but found at least two devices, sim:0 and cpu!");
  }
}

TEST(Tensor, ToCopiesDataAndChargesTheHostLink) {
  Device sim = make_sim();
  const std::vector<float> v(1000, 1.5f);
  Tensor host = Tensor::from_floats(v, {10, 100});
  Tensor dev = host.to(sim);
  EXPECT_EQ(dev.device(), sim);
  EXPECT_EQ(dev.to_vector(), v);
  const int64_t expected_ns = transfer_time_ns(sim.hardware()->host_link, 4000);
  EXPECT_EQ(sim.clock_ns(StreamKind::kCopy), expected_ns);
  EXPECT_EQ(sim.clock_ns(StreamKind::kCompute), expected_ns);  // a synchronous copy
  EXPECT_EQ(host.to(Device::cpu()).f32(), host.f32());         // no copy when already there
}

TEST(Tensor, CopyFromAnotherDeviceCopiesStraightIntoRowsAndChargesTheLink) {
  Device sim = make_sim();
  Tensor out = Tensor::zeros({4, 3}, sim);
  const std::vector<float> values{1, 2, 3, 4, 5, 6};
  const Tensor rows = Tensor::from_floats(values, {2, 3});  // on the cpu
  out.rows(1, 2).copy_from(rows);                           // like DataParallel's gather
  EXPECT_EQ(out.to_vector(), (std::vector<float>{0, 0, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0}));
  const int64_t expected_ns = transfer_time_ns(sim.hardware()->host_link, 6 * sizeof(float));
  EXPECT_EQ(sim.clock_ns(StreamKind::kCopy), expected_ns);  // charged as .to() charges it
  try {
    out.rows(0, 1).copy_from(rows);
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "copy_from: float32 [2, 3] into float32 [1, 3]");
  }
}

TEST(Tensor, MetaTensorsHaveShapeButNoData) {
  Device sim = make_sim();
  Tensor t = Tensor::meta({1024, 1024}, sim, MemoryCategory::kParameters);
  EXPECT_FALSE(t.has_data());
  EXPECT_EQ(sim.memory().bytes[0], 4u * 1024 * 1024);
  EXPECT_THROW(t.f32(), Error);
}

// NCCL's other element types (nccl-tests' -d) are for meta tensors only: bytes, no data.
TEST(Tensor, OtherElementTypesAreMetaOnly) {
  Device sim = make_sim();
  struct Case {
    DType dtype;
    const char* name;
    size_t size;
  };
  for (const Case& c :
       {Case{DType::kF32, "float32", 4}, Case{DType::kI64, "int64", 8}, Case{DType::kF16, "float16", 2},
        Case{DType::kBF16, "bfloat16", 2}, Case{DType::kF64, "float64", 8}, Case{DType::kI8, "int8", 1},
        Case{DType::kU8, "uint8", 1}, Case{DType::kI32, "int32", 4}, Case{DType::kU32, "uint32", 4},
        Case{DType::kU64, "uint64", 8}}) {
    SCOPED_TRACE(c.name);
    EXPECT_STREQ(to_string(c.dtype), c.name);
    EXPECT_EQ(element_size(c.dtype), c.size);
    const Tensor meta = Tensor::meta({6}, sim, MemoryCategory::kBuffers, c.dtype);
    EXPECT_EQ(meta.nbytes(), 6 * c.size);
    EXPECT_EQ(holds_data(c.dtype), c.dtype == DType::kF32 || c.dtype == DType::kI64);
    if (holds_data(c.dtype)) continue;
    try {
      Tensor::zeros({6}, sim, MemoryCategory::kBuffers, c.dtype);
      FAIL() << "expected a refusal";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
      EXPECT_EQ(std::string(e.what()),
                fmt::format("a {0} tensor has no data here: only a timing-only (meta) tensor may be {0}; "
                            "tensors with data are float32 or int64",
                            c.name));
    }
  }
}

}  // namespace
}  // namespace dpscope
