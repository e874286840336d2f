// GgufFile on well-formed files: every value type, tensors, mapping a file.
// Malformed input is in gguf_file_errors_test.cc.
#include "model/gguf/gguf_file.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model/gguf/gguf_builder.h"

namespace beacon {
namespace gguf_file_test {
namespace {

using test::GgufBuilder;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint32_t kF32 = 0, kF16 = 1, kQ8_0 = 8;

// FromBuffer does not copy, so the result shares ownership of the bytes with
// the file that views them.
std::shared_ptr<const GgufFile> Parse(std::string bytes) {
  auto holder = std::make_shared<std::pair<std::string, std::unique_ptr<GgufFile>>>();
  holder->first = std::move(bytes);
  auto file = GgufFile::FromBuffer(holder->first, "test.gguf");
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  holder->second = std::move(*file);
  return std::shared_ptr<const GgufFile>(holder, holder->second.get());
}

TEST(GgufFileTest, EmptyFileWithHeaderOnly) {
  const std::string bytes = GgufBuilder().Build();
  ASSERT_EQ(bytes.size(), 24u);
  auto f = Parse(bytes);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_TRUE(f->metadata().empty());
  EXPECT_TRUE(f->tensor_infos().empty());
}

TEST(GgufFileTest, AcceptsVersion2) {
  auto f = Parse(GgufBuilder().Version(2).U32("a", 7).Build());
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(*f->GetU32("a"), 7u);
}

TEST(GgufFileTest, EveryScalarTypeRoundTrips) {
  auto f = Parse(GgufBuilder()
                     .U8("u8", 200)
                     .I8("i8", -5)
                     .U16("u16", 65000)
                     .I16("i16", -30000)
                     .U32("u32", 4000000000u)
                     .I32("i32", -2000000000)
                     .U64("u64", uint64_t{1} << 62)
                     .I64("i64", -(int64_t{1} << 62))
                     .F32("f32", 1.5f)
                     .F64("f64", 0.25)
                     .Bool("yes", true)
                     .Bool("no", false)
                     .Str("s", std::string("h\0i", 3))
                     .Str("empty", "")
                     .Build());
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(*f->GetInt("u8"), 200);
  EXPECT_EQ(*f->GetInt("i8"), -5);
  EXPECT_EQ(*f->GetInt("u16"), 65000);
  EXPECT_EQ(*f->GetInt("i16"), -30000);
  EXPECT_EQ(*f->GetU32("u32"), 4000000000u);
  EXPECT_EQ(*f->GetInt("i32"), -2000000000);
  EXPECT_EQ(*f->GetInt("u64"), int64_t{1} << 62);
  EXPECT_EQ(*f->GetInt("i64"), -(int64_t{1} << 62));
  EXPECT_EQ(*f->GetF32("f32"), 1.5f);
  EXPECT_EQ(*f->GetF32("f64"), 0.25f);
  EXPECT_TRUE(*f->GetBool("yes"));
  EXPECT_FALSE(*f->GetBool("no"));
  EXPECT_EQ(*f->GetString("s"), std::string("h\0i", 3));
  EXPECT_EQ(*f->GetString("empty"), "");

  // The directory keeps file order and the stored types.
  ASSERT_EQ(f->metadata().size(), 14u);
  EXPECT_EQ(f->metadata()[0].key, "u8");
  EXPECT_EQ(f->metadata()[0].value.type, GgufValueType::kUint8);
  EXPECT_EQ(f->metadata()[9].value.type, GgufValueType::kFloat64);
  EXPECT_EQ(FormatGgufValue(*f->Find("i16")), "-30000");
  EXPECT_EQ(FormatGgufValue(*f->Find("u64")), "4611686018427387904");
  EXPECT_EQ(FormatGgufValue(*f->Find("yes")), "true");
  EXPECT_EQ(FormatGgufValue(*f->Find("s")), "\"h\\x00i\"");
}

TEST(GgufFileTest, ArraysOfEveryKindRoundTrip) {
  using test::EncodeArray;
  auto f = Parse(GgufBuilder()
                     .StrArray("strs", {"a", "", "ccc"})
                     .I32Array("i32s", {-1, 0, 2147483647})
                     .F32Array("f32s", {0.5f, -2.0f})
                     .Raw("u8s", 9, EncodeArray<uint8_t>(GgufValueType::kUint8, {1, 255}))
                     .Raw("i64s", 9, EncodeArray<int64_t>(GgufValueType::kInt64, {-3, 4}))
                     .Raw("f64s", 9, EncodeArray<double>(GgufValueType::kFloat64, {1.25}))
                     .Raw("bools", 9, EncodeArray<uint8_t>(GgufValueType::kBool, {1, 0}))
                     .Raw("nested", 9,
                          test::EncodeArrayOfArrays(
                              {EncodeArray<int32_t>(GgufValueType::kInt32, {1, 2}), test::EncodeStringArray({"x"})}))
                     .StrArray("none", {})
                     .Build());
  ASSERT_NE(f, nullptr);
  EXPECT_THAT(*f->GetStringArray("strs"), ElementsAre("a", "", "ccc"));
  EXPECT_THAT(*f->GetI32Array("i32s"), ElementsAre(-1, 0, 2147483647));
  EXPECT_THAT(*f->GetF32Array("f32s"), ElementsAre(0.5f, -2.0f));
  EXPECT_THAT(*f->GetI32Array("u8s"), ElementsAre(1, 255));
  EXPECT_THAT(*f->GetI32Array("i64s"), ElementsAre(-3, 4));
  EXPECT_THAT(*f->GetF32Array("f64s"), ElementsAre(1.25f));
  EXPECT_TRUE(f->GetStringArray("none")->empty());
  EXPECT_EQ(FormatGgufValue(*f->Find("bools")), "[true, false]");
  EXPECT_EQ(FormatGgufValue(*f->Find("nested")), "[[1, 2], [\"x\"]]");
  EXPECT_EQ(f->Find("nested")->TypeName(), "ARRAY[ARRAY]");
  EXPECT_EQ(FormatGgufValue(*f->Find("strs"), 2), "[\"a\", \"\", ... (3 total)]");

  auto nested = f->GetI32Array("nested");
  EXPECT_EQ(nested.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(nested.status().message(), HasSubstr("ARRAY[ARRAY]"));
}

TEST(GgufFileTest, IntegerGettersAcceptAnyTypeThatFits) {
  auto f = Parse(GgufBuilder()
                     .U8("small", 9)
                     .I64("big_ok", 4000000000)
                     .I64("too_big", int64_t{1} << 33)
                     .I32("negative", -1)
                     .U64("huge", ~uint64_t{0})
                     .Raw("wide", 9, test::EncodeArray<int64_t>(GgufValueType::kInt64, {int64_t{1} << 40}))
                     .Build());
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(*f->GetU32("small"), 9u);
  EXPECT_EQ(*f->GetU32("big_ok"), 4000000000u);
  EXPECT_THAT(f->GetU32("too_big").status().message(), HasSubstr("does not fit in uint32"));
  EXPECT_THAT(f->GetU32("negative").status().message(), HasSubstr("-1 does not fit"));
  EXPECT_EQ(*f->GetInt("negative"), -1);
  EXPECT_EQ(f->GetInt("huge").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f->GetI32Array("wide").status().message(), HasSubstr("element 0"));
}

TEST(GgufFileTest, MissingKeyIsNotFound) {
  auto f = Parse(GgufBuilder().U32("a", 1).Build());
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(f->Has("b"));
  EXPECT_EQ(f->Find("b"), nullptr);
  auto s = f->GetString("b");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.status().message(), HasSubstr("'b'"));
}

TEST(GgufFileTest, WrongMetadataTypeNamesKeyAndBothTypes) {
  auto f = Parse(
      GgufBuilder().Str("llama.block_count", "thirty").U32("n", 3).F64("big", 1e300).I32Array("ints", {1}).Build());
  ASSERT_NE(f, nullptr);
  auto n = f->GetU32("llama.block_count");
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(n.status().message(), HasSubstr("test.gguf: metadata 'llama.block_count'"));
  EXPECT_THAT(n.status().message(), HasSubstr("STRING, expected an integer"));
  EXPECT_THAT(f->GetString("n").status().message(), HasSubstr("UINT32, expected STRING"));
  EXPECT_THAT(f->GetF32("n").status().message(), HasSubstr("expected FLOAT32"));
  EXPECT_THAT(f->GetBool("n").status().message(), HasSubstr("expected BOOL"));
  EXPECT_THAT(f->GetF32("big").status().message(), HasSubstr("does not fit in float"));
  EXPECT_THAT(f->GetStringArray("ints").status().message(), HasSubstr("ARRAY[INT32], expected ARRAY[STRING]"));
  EXPECT_THAT(f->GetF32Array("ints").status().message(), HasSubstr("expected a float array"));
  EXPECT_THAT(f->GetI32Array("n").status().message(), HasSubstr("expected an array"));
}

TEST(GgufFileTest, TensorsRoundTripAtAlignedOffsets) {
  const std::vector<float> values = {1, -2, 3.5, 0, 7, 8};
  const std::string q8 = test::PatternData({64, 3}, kQ8_0);
  auto bytes = GgufBuilder()
                   .Str("general.architecture", "llama")
                   .Tensor("a", {3, 2}, kF32, test::F32Data(values))
                   .Tensor("b.weight", {64, 3}, kQ8_0, q8)
                   .Tensor("c", {5}, kF16, test::F16Data({1, 2, 3, 4, 5}))
                   .Build();
  auto f = Parse(bytes);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  ASSERT_EQ(f->tensor_infos().size(), 3u);
  EXPECT_EQ(f->tensor_infos()[1].offset % 32, 0u);

  auto a = f->FindTensor("a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->n_dims, 2);
  EXPECT_EQ(a->ne[0], 3);
  EXPECT_EQ(a->ne[1], 2);
  EXPECT_EQ(a->ne[2], 1);
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(a->nbytes, 24u);
  EXPECT_EQ(std::memcmp(a->data, values.data(), 24), 0);

  auto b = f->FindTensor("b.weight");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->dtype, DType::kQ8_0);
  EXPECT_EQ(b->nbytes, 3u * 2 * 34);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b->data), b->nbytes), q8);

  auto c = f->FindTensor("c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Fp16ToFp32(reinterpret_cast<const uint16_t*>(c->data)[4]), 5.0f);
  // The last tensor's data ends exactly at the end of the file.
  EXPECT_EQ(f->bytes().size(), bytes.size());
  EXPECT_EQ(c->data + c->nbytes, reinterpret_cast<const uint8_t*>(f->bytes().data()) + f->bytes().size());

  EXPECT_EQ(f->FindTensor("d").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(f->HasTensor("c"));
  EXPECT_FALSE(f->HasTensor("d"));
}

TEST(GgufFileTest, HonoursGeneralAlignment) {
  auto f = Parse(GgufBuilder()
                     .Alignment(64)
                     .Tensor("a", {3}, kF32, test::F32Data({1, 2, 3}))
                     .Tensor("b", {3}, kF32, test::F32Data({4, 5, 6}))
                     .Build());
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(f->tensor_infos()[1].offset, 64u);
  auto b = f->FindTensor("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(reinterpret_cast<const float*>(b->data)[2], 6.0f);
}

// A file written by gguf-py (llama.cpp's Python writer), an implementation
// independent of GgufBuilder: see tests/fuzz/make_corpus.py.
TEST(GgufFileTest, ReadsAFileWrittenByGgufPy) {
  const std::string path = std::string(BEACON_SOURCE_DIR) + "/tests/fuzz/corpus/all_value_types.gguf";
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& g = **f;
  EXPECT_EQ(*g.GetString("general.architecture"), "llama");
  EXPECT_EQ(*g.GetInt("t.u8"), 200);
  EXPECT_EQ(*g.GetInt("t.i8"), -5);
  EXPECT_EQ(*g.GetInt("t.u16"), 65000);
  EXPECT_EQ(*g.GetInt("t.i16"), -30000);
  EXPECT_EQ(*g.GetU32("t.u32"), 4000000000u);
  EXPECT_EQ(*g.GetInt("t.i32"), -2000000000);
  EXPECT_EQ(*g.GetInt("t.u64"), int64_t{1} << 62);
  EXPECT_EQ(*g.GetInt("t.i64"), -(int64_t{1} << 62));
  EXPECT_EQ(*g.GetF32("t.f32"), 1.5f);
  EXPECT_EQ(*g.GetF32("t.f64"), 0.25f);
  EXPECT_TRUE(*g.GetBool("t.bool"));
  EXPECT_EQ(*g.GetString("t.str"), "hello");
  EXPECT_THAT(*g.GetStringArray("t.strs"), ElementsAre("a", "", "ccc"));
  EXPECT_THAT(*g.GetI32Array("t.ints"), ElementsAre(1, -2, 3));
  EXPECT_THAT(*g.GetF32Array("t.floats"), ElementsAre(0.5f, -1.0f));
  EXPECT_EQ(FormatGgufValue(*g.Find("t.nested")), "[[1, 2], [3]]");

  auto t = g.FindTensor("t.f32_tensor");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ne[0], 8);
  EXPECT_EQ(reinterpret_cast<const float*>(t->data)[7], 7.0f);
  // A Q6_K tensor (one zero super-block) is read in its type.
  auto q6 = g.FindTensor("t.q6k");
  ASSERT_TRUE(q6.ok()) << q6.status();
  EXPECT_EQ(q6->dtype, DType::kQ6_K);
  EXPECT_EQ(q6->ne[0], 256);
  EXPECT_EQ(q6->nbytes, 210u);
}

class GgufOpenTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    std::string path = ::testing::TempDir() + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    written_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const auto& p : written_) std::remove(p.c_str());
  }
  std::vector<std::string> written_;
};

TEST_F(GgufOpenTest, MapsAFile) {
  const std::string path =
      Write("open_test.gguf",
            GgufBuilder().Str("general.name", "tiny").Tensor("t", {2}, kF32, test::F32Data({3, 4})).Build());
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->name(), path);
  EXPECT_EQ(*(*f)->GetString("general.name"), "tiny");
  auto t = (*f)->FindTensor("t");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(reinterpret_cast<const float*>(t->data)[1], 4.0f);
}

TEST_F(GgufOpenTest, MissingFileIsNotFound) {
  auto f = GgufFile::Open("/nonexistent/dir/model.gguf");
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(f.status().message(), HasSubstr("/nonexistent/dir/model.gguf"));
}

TEST_F(GgufOpenTest, DirectoryIsRejected) {
  auto f = GgufFile::Open(::testing::TempDir());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(f.status().message(), HasSubstr("not a regular file"));
}

TEST_F(GgufOpenTest, EmptyFileIsDataLoss) {
  auto f = GgufFile::Open(Write("empty.gguf", ""));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(f.status().message(), HasSubstr("empty.gguf"));
}

}  // namespace
}  // namespace gguf_file_test
}  // namespace beacon
