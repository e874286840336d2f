#include "model/safetensors.h"

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model/safetensors_writer.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;
using testing_util::Encode;
using testing_util::HeaderFor;
using testing_util::MakeTempDir;
using testing_util::TensorSpec;
using testing_util::WriteRaw;
using testing_util::WriteSafetensors;
using testing_util::WriteText;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("safetensors"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // Opens a file whose header is `header` followed by `data_bytes` zero bytes.
  absl::Status OpenWithHeader(const std::string& header, size_t data_bytes) {
    WriteRaw(Path("x.safetensors"), header, std::vector<uint8_t>(data_bytes, 0));
    return SafetensorsFile::Open(Path("x.safetensors")).status();
  }

  std::string dir_;
};

std::vector<TensorSpec> ThreeTensors() {
  return {
      {"a", "F32", {2, 3}, Encode({1, 2, 3, 4, 5, 6}, "F32")},
      {"b", "F16", {4}, Encode({0.5f, -1.0f, 2.0f, 1024.0f}, "F16")},
      {"c.weight", "BF16", {1, 2}, Encode({-3.0f, 0.125f}, "BF16")},
  };
}

TEST_F(SafetensorsTest, RoundTripsDtypesShapesAndBytes) {
  const auto specs = ThreeTensors();
  WriteSafetensors(Path("m.safetensors"), specs);
  auto f = SafetensorsFile::Open(Path("m.safetensors"));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ((*f)->tensors().size(), 3u);  // __metadata__ is not a tensor
  for (const auto& s : specs) {
    const SafetensorsTensor* t = (*f)->Find(s.name);
    ASSERT_NE(t, nullptr) << s.name;
    EXPECT_EQ(t->dtype_name, s.dtype);
    EXPECT_EQ(t->shape, s.shape);
    ASSERT_EQ(t->nbytes, s.bytes.size());
    EXPECT_EQ(std::memcmp(t->data, s.bytes.data(), s.bytes.size()), 0) << s.name;
  }
  EXPECT_EQ((*f)->Find("a")->dtype, DType::kF32);
  EXPECT_EQ((*f)->Find("b")->dtype, DType::kF16);
  EXPECT_EQ((*f)->Find("c.weight")->dtype, DType::kBF16);
  EXPECT_EQ((*f)->Find("a")->ShapeString(), "[2, 3]");
  EXPECT_EQ((*f)->Find("a")->numel(), 6);
  EXPECT_EQ((*f)->Find("missing"), nullptr);
}

TEST_F(SafetensorsTest, ZeroSizedAndScalarTensorsAreFine) {
  WriteSafetensors(Path("m.safetensors"), {{"empty", "F32", {0, 4}, {}}, {"scalar", "F32", {}, Encode({7.0f}, "F32")}});
  auto f = SafetensorsFile::Open(Path("m.safetensors"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->Find("empty")->nbytes, 0u);
  EXPECT_EQ((*f)->Find("scalar")->numel(), 1);
}

TEST_F(SafetensorsTest, MissingFileIsNotFound) {
  auto f = SafetensorsFile::Open(Path("nope.safetensors"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("nope.safetensors"));
}

TEST_F(SafetensorsTest, FileShorterThanLengthField) {
  WriteText(Path("short.safetensors"), "abc");
  auto f = SafetensorsFile::Open(Path("short.safetensors"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("too short"));
}

TEST_F(SafetensorsTest, HeaderLengthPastEndOfFile) {
  WriteRaw(Path("x.safetensors"), "{}", {}, /*length_field=*/1000);
  auto f = SafetensorsFile::Open(Path("x.safetensors"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("header length 1000 exceeds"));
  // A length so large that 8 + N wraps around must not pass either.
  WriteRaw(Path("x.safetensors"), "{}", {}, /*length_field=*/INT64_MAX);
  EXPECT_EQ(SafetensorsFile::Open(Path("x.safetensors")).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SafetensorsTest, BadJson) {
  absl::Status s = OpenWithHeader("{\"a\": {\"dtype\": ", 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("not valid JSON"));
  s = OpenWithHeader("[1, 2]", 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("not an object"));
}

TEST_F(SafetensorsTest, MalformedEntries) {
  struct Case {
    const char* header;
    const char* message;
  } cases[] = {
      {R"({"t": 3})", "tensor t: entry is a JSON number"},
      {R"({"t": {"shape": [1], "data_offsets": [0, 4]}})", "tensor t: 'dtype' missing"},
      {R"({"t": {"dtype": "F32", "data_offsets": [0, 4]}})", "tensor t: 'shape' missing"},
      {R"({"t": {"dtype": "F32", "shape": [1]}})", "tensor t: 'data_offsets' must be"},
      {R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", "'data_offsets' must be"},
      {R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", "'data_offsets' must be"},
      {R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", "shape entries must be"},
      {R"({"t": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", "shape entries must be"},
      {R"({"t": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}})", "unknown dtype 'F99'"},
  };
  for (const auto& c : cases) {
    absl::Status s = OpenWithHeader(c.header, 16);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.header;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message)) << c.header;
  }
}

TEST_F(SafetensorsTest, OffsetsOutOfBounds) {
  absl::Status s = OpenWithHeader(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})", 16);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("tensor w: data_offsets [8, 24] out of bounds of the 16-byte"));
  s = OpenWithHeader(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 16);
  EXPECT_THAT(std::string(s.message()), HasSubstr("out of bounds"));
}

TEST_F(SafetensorsTest, ShapeDisagreesWithOffsets) {
  absl::Status s = OpenWithHeader(R"({"w": {"dtype": "BF16", "shape": [3, 2], "data_offsets": [0, 16]}})", 16);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("tensor w: data_offsets span 16 bytes but shape [3, 2] of BF16 needs 12"));
}

TEST_F(SafetensorsTest, ShapeProductOverflowIsCaught) {
  absl::Status s =
      OpenWithHeader(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 0]}})", 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("overflows"));
  // numel fits but numel * 4 bytes does not.
  s = OpenWithHeader(R"({"w": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 0]}})", 0);
  EXPECT_THAT(std::string(s.message()), HasSubstr("overflows"));
}

TEST_F(SafetensorsTest, OverlappingTensorsAreRefused) {
  absl::Status s = OpenWithHeader(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                                  16);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("overlap"));
}

TEST_F(SafetensorsTest, UnsupportedDtypeOpensButGetNamesTensorAndDtype) {
  WriteSafetensors(Path("model.safetensors"),
                   {{"ids", "I64", {2}, std::vector<uint8_t>(16, 1)}, {"w", "F32", {1}, Encode({1}, "F32")}});
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ASSERT_NE(ckpt->Find("ids"), nullptr);
  EXPECT_FALSE(ckpt->Find("ids")->dtype.has_value());
  auto t = ckpt->Get("ids");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("tensor ids"));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("has dtype I64"));
  EXPECT_TRUE(ckpt->Get("w").ok());
  auto missing = ckpt->Get("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("tensor nope is missing"));
}

TEST_F(SafetensorsTest, EmptyDirectoryIsNotFound) {
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_);
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(ckpt.status().message()), HasSubstr("model.safetensors"));
}

class ShardedTest : public SafetensorsTest {
 protected:
  void WriteShards() {
    auto specs = ThreeTensors();
    WriteSafetensors(Path("model-00001-of-00002.safetensors"), {specs[0], specs[1]});
    WriteSafetensors(Path("model-00002-of-00002.safetensors"), {specs[2]});
  }
  void WriteIndex(const nlohmann::json& weight_map) {
    WriteText(Path("model.safetensors.index.json"),
              nlohmann::json({{"metadata", {{"total_size", 30}}}, {"weight_map", weight_map}}).dump());
  }
  nlohmann::json GoodMap() const {
    return {{"a", "model-00001-of-00002.safetensors"},
            {"b", "model-00001-of-00002.safetensors"},
            {"c.weight", "model-00002-of-00002.safetensors"}};
  }
};

TEST_F(ShardedTest, FindsEveryTensorInItsShard) {
  WriteShards();
  WriteIndex(GoodMap());
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->num_tensors(), 3u);
  EXPECT_EQ(ckpt->Mappings().size(), 2u);
  for (const auto& s : ThreeTensors()) {
    auto t = ckpt->Get(s.name);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(std::memcmp((*t)->data, s.bytes.data(), s.bytes.size()), 0) << s.name;
  }
  EXPECT_THAT(ckpt->FileOf("c.weight"), HasSubstr("model-00002-of-00002.safetensors"));
}

TEST_F(ShardedTest, MissingShardIsNotFound) {
  WriteShards();
  nlohmann::json map = GoodMap();
  map["c.weight"] = "model-00003-of-00003.safetensors";
  WriteIndex(map);
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_);
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(ckpt.status().message()), HasSubstr("model-00003-of-00003.safetensors"));
}

TEST_F(ShardedTest, IndexPlacingATensorInTheWrongShard) {
  WriteShards();
  nlohmann::json map = GoodMap();
  map["b"] = "model-00002-of-00002.safetensors";
  WriteIndex(map);
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_);
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ckpt.status().message()), HasSubstr("places b in"));
}

TEST_F(ShardedTest, ShardNamesMustStayInTheDirectory) {
  WriteShards();
  nlohmann::json map = GoodMap();
  map["a"] = "../model-00001-of-00002.safetensors";
  WriteIndex(map);
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_);
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ckpt.status().message()), HasSubstr("not a plain file name"));
}

TEST_F(ShardedTest, TensorInTwoShardsIsRefused) {
  auto specs = ThreeTensors();
  WriteSafetensors(Path("s1.safetensors"), {specs[0]});
  WriteSafetensors(Path("s2.safetensors"), {specs[0], specs[1]});
  WriteIndex({{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_);
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ckpt.status().message()), HasSubstr("tensor a appears in both"));
}

TEST_F(ShardedTest, IndexWithoutWeightMap) {
  WriteText(Path("model.safetensors.index.json"), R"({"metadata": {}})");
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_);
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ckpt.status().message()), HasSubstr("'weight_map' missing"));
}

}  // namespace
}  // namespace beacon
