// GgufFile on malformed input: each case must fail with the right code and a
// message that names the problem, and no input may crash (ASan/UBSan builds
// and the fuzzer check the "no UB" half).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gguf/gguf_file.h"
#include "tests/model/gguf/gguf_builder.h"

namespace beacon {
namespace {

using test::GgufBuilder;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint32_t kF32 = 0, kQ8_0 = 8, kQ6_K = 14;
constexpr uint32_t kArray = 9, kString = 8;

absl::Status ParseStatus(const std::string& bytes) { return GgufFile::FromBuffer(bytes, "bad.gguf").status(); }

// A small valid file using every value type and a few tensors; its last
// tensor's data ends the file, so every strict prefix is missing something.
std::string ValidFile() {
  using test::EncodeArray;
  return GgufBuilder()
      .Str("general.architecture", "llama")
      .U8("u8", 1)
      .I8("i8", -1)
      .U16("u16", 2)
      .I16("i16", -2)
      .U32("u32", 3)
      .I32("i32", -3)
      .U64("u64", 4)
      .I64("i64", -4)
      .F32("f32", 0.5f)
      .F64("f64", 0.25)
      .Bool("b", true)
      .StrArray("strs", {"a", "bc"})
      .Raw("nested", kArray, test::EncodeArrayOfArrays({EncodeArray<int16_t>(GgufValueType::kInt16, {1, 2})}))
      .Tensor("w", {32, 2}, kQ8_0)
      .Tensor("v", {3}, kF32, test::F32Data({1, 2, 3}))
      .Build();
}

void ExpectError(const absl::Status& st, absl::StatusCode code, const std::vector<std::string>& substrings) {
  EXPECT_EQ(st.code(), code) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("bad.gguf"));
  for (const auto& s : substrings) EXPECT_THAT(std::string(st.message()), HasSubstr(s));
}

TEST(GgufFileErrorsTest, ValidFileParses) { EXPECT_TRUE(ParseStatus(ValidFile()).ok()); }

TEST(GgufFileErrorsTest, BadMagic) {
  std::string bytes = ValidFile();
  bytes[0] = 'X';
  ExpectError(ParseStatus(bytes), absl::StatusCode::kInvalidArgument, {"bad magic 'XGUF'", "offset 0"});
}

TEST(GgufFileErrorsTest, Version1IsUnsupported) {
  ExpectError(ParseStatus(GgufBuilder().Version(1).Build()), absl::StatusCode::kInvalidArgument,
              {"unsupported GGUF version 1", "supported: 2, 3"});
}

TEST(GgufFileErrorsTest, Version4IsUnsupported) {
  ExpectError(ParseStatus(GgufBuilder().Version(4).Build()), absl::StatusCode::kInvalidArgument,
              {"unsupported GGUF version 4"});
}

TEST(GgufFileErrorsTest, BigEndianFileIsNamedAsSuch) {
  ExpectError(ParseStatus(GgufBuilder().Version(0x03000000).Build()), absl::StatusCode::kInvalidArgument,
              {"big-endian"});
}

TEST(GgufFileErrorsTest, EveryTruncationIsDataLoss) {
  const std::string bytes = ValidFile();
  for (size_t n = 0; n < bytes.size(); ++n) {
    // A copy of exactly n bytes, so ASan sees any read past the prefix.
    const std::string prefix = bytes.substr(0, n);
    absl::Status st = ParseStatus(prefix);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << "prefix " << n << ": " << st;
  }
}

TEST(GgufFileErrorsTest, StringLengthBeyondFile) {
  std::string value;
  test::PutU64(value, ~uint64_t{0});
  value += "abc";
  ExpectError(ParseStatus(GgufBuilder().Raw("name", kString, value).Build()), absl::StatusCode::kDataLoss,
              {"metadata 'name'", "string length 18446744073709551615", "remaining 3 bytes"});
}

TEST(GgufFileErrorsTest, KeyLengthBeyondFile) {
  std::string bytes = GgufBuilder().U32("key", 1).Build();
  bytes[24] = '\x7f';  // the key's length field starts right after the header
  ExpectError(ParseStatus(bytes), absl::StatusCode::kDataLoss, {"key length 127", "offset 24"});
}

TEST(GgufFileErrorsTest, AbsurdTensorCount) {
  ExpectError(ParseStatus(GgufBuilder().TensorCount(uint64_t{1} << 40).Build()), absl::StatusCode::kInvalidArgument,
              {"tensor count 1099511627776", "absurd"});
}

TEST(GgufFileErrorsTest, TensorCountBeyondFile) {
  ExpectError(ParseStatus(GgufBuilder().TensorCount(1000).Build()), absl::StatusCode::kDataLoss,
              {"1000 tensor infos cannot fit"});
}

TEST(GgufFileErrorsTest, AbsurdMetadataCount) {
  ExpectError(ParseStatus(GgufBuilder().KvCount(~uint64_t{0}).Build()), absl::StatusCode::kInvalidArgument,
              {"metadata count", "absurd"});
}

TEST(GgufFileErrorsTest, ArrayLengthBeyondFile) {
  std::string value;
  test::PutU32(value, static_cast<uint32_t>(GgufValueType::kUint32));
  test::PutU64(value, uint64_t{1} << 60);
  ExpectError(ParseStatus(GgufBuilder().Raw("arr", kArray, value).Build()), absl::StatusCode::kDataLoss,
              {"metadata 'arr'", "array of 1152921504606846976 UINT32", "cannot fit"});
}

TEST(GgufFileErrorsTest, StringArrayLengthBeyondFile) {
  std::string value;
  test::PutU32(value, kString);
  test::PutU64(value, 1000);
  ExpectError(ParseStatus(GgufBuilder().Raw("arr", kArray, value).Build()), absl::StatusCode::kDataLoss,
              {"array of 1000 STRING"});
}

TEST(GgufFileErrorsTest, UnknownValueType) {
  ExpectError(ParseStatus(GgufBuilder().Raw("k", 13, "xxxx").Build()), absl::StatusCode::kInvalidArgument,
              {"metadata 'k'", "unknown value type 13"});
}

TEST(GgufFileErrorsTest, UnknownArrayElementType) {
  std::string value;
  test::PutU32(value, 99);
  test::PutU64(value, 0);
  ExpectError(ParseStatus(GgufBuilder().Raw("k", kArray, value).Build()), absl::StatusCode::kInvalidArgument,
              {"unknown array element type 99"});
}

TEST(GgufFileErrorsTest, BoolMustBeZeroOrOne) {
  ExpectError(ParseStatus(GgufBuilder().Raw("flag", 7, "\x02").Build()), absl::StatusCode::kInvalidArgument,
              {"metadata 'flag'", "bool value 2"});
}

TEST(GgufFileErrorsTest, ArraysNestedTooDeep) {
  std::string value = test::EncodeArray<int32_t>(GgufValueType::kInt32, {1});
  for (int i = 0; i < kGgufMaxArrayDepth; ++i) value = test::EncodeArrayOfArrays({value});
  ExpectError(ParseStatus(GgufBuilder().Raw("deep", kArray, value).Build()), absl::StatusCode::kInvalidArgument,
              {"nested deeper than 8"});
}

TEST(GgufFileErrorsTest, DuplicateKey) {
  std::string u32;
  test::PutU32(u32, 5);
  // Raw() replaces an existing key, so write the second copy under a
  // same-length key and patch its name.
  std::string bytes = GgufBuilder().U32("dup", 1).Raw("DUP", 4, u32).Build();
  bytes.replace(bytes.find("DUP"), 3, "dup");
  ExpectError(ParseStatus(bytes), absl::StatusCode::kInvalidArgument, {"duplicate metadata key 'dup'"});
}

TEST(GgufFileErrorsTest, EmptyKey) {
  ExpectError(ParseStatus(GgufBuilder().U32("", 1).Build()), absl::StatusCode::kInvalidArgument, {"empty key"});
}

TEST(GgufFileErrorsTest, AlignmentNotAPowerOfTwo) {
  ExpectError(ParseStatus(GgufBuilder().U32("general.alignment", 48).Build()), absl::StatusCode::kInvalidArgument,
              {"general.alignment 48", "power of two"});
}

TEST(GgufFileErrorsTest, AlignmentOfTheWrongType) {
  ExpectError(ParseStatus(GgufBuilder().Str("general.alignment", "32").Build()), absl::StatusCode::kInvalidArgument,
              {"general.alignment", "STRING"});
}

TEST(GgufFileErrorsTest, UnknownGgmlTypeIsReportedWhenTheTensorIsRead) {
  const std::string bytes = GgufBuilder().TensorAt("odd.weight", {4}, 77, 0).Build();
  auto f = GgufFile::FromBuffer(bytes, "bad.gguf");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE((*f)->tensor_infos()[0].size_known);
  ExpectError((*f)->FindTensor("odd.weight").status(), absl::StatusCode::kInvalidArgument,
              {"tensor odd.weight has unsupported type unknown (77)"});
}

TEST(GgufFileErrorsTest, KnownButUnsupportedTypeIsNamed) {
  // IQ4_XS (23): sized and bounds-checked by the parser (136 bytes per 256),
  // refused by name when a tensor of it is asked for.
  const std::string bytes = GgufBuilder().Tensor("blk.0.ffn_down.weight", {256}, 23).Build();
  auto f = GgufFile::FromBuffer(bytes, "bad.gguf");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->tensor_infos()[0].nbytes, 136u);
  ExpectError((*f)->FindTensor("blk.0.ffn_down.weight").status(), absl::StatusCode::kInvalidArgument,
              {"tensor blk.0.ffn_down.weight has unsupported type IQ4_XS (23)"});
}

TEST(GgufFileErrorsTest, KQuantTensorIsRead) {
  const std::string bytes = GgufBuilder().Tensor("blk.0.ffn_down.weight", {256}, kQ6_K).Build();
  auto f = GgufFile::FromBuffer(bytes, "k.gguf");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->tensor_infos()[0].nbytes, 210u);
  auto t = (*f)->FindTensor("blk.0.ffn_down.weight");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype, DType::kQ6_K);
}

TEST(GgufFileErrorsTest, MisalignedTensorOffset) {
  ExpectError(ParseStatus(GgufBuilder().TensorAt("t", {4}, kF32, 16).Build()), absl::StatusCode::kInvalidArgument,
              {"tensor 't'", "data offset 16", "not a multiple of the alignment 32"});
}

TEST(GgufFileErrorsTest, TensorDataBeyondFile) {
  const std::string bytes =
      GgufBuilder().Tensor("a", {4}, kF32, test::F32Data({1, 2, 3, 4})).TensorAt("b", {1000}, kF32, 32).Build();
  ExpectError(ParseStatus(bytes), absl::StatusCode::kDataLoss,
              {"tensor 'b'", "4000 bytes at data offset 32", "past the end of the file"});
}

TEST(GgufFileErrorsTest, TensorOffsetNearUint64Max) {
  ExpectError(ParseStatus(GgufBuilder().TensorAt("t", {1}, kF32, ~uint64_t{31}).Build()), absl::StatusCode::kDataLoss,
              {"tensor 't'", "past the end"});
}

TEST(GgufFileErrorsTest, FiveDimensions) {
  ExpectError(ParseStatus(GgufBuilder().TensorAt("t", {1, 1, 1, 1, 1}, kF32, 0).Build()),
              absl::StatusCode::kInvalidArgument, {"tensor 't'", "n_dims 5", "[1, 4]"});
}

TEST(GgufFileErrorsTest, ZeroDimensions) {
  ExpectError(ParseStatus(GgufBuilder().TensorAt("t", {}, kF32, 0).Build()), absl::StatusCode::kInvalidArgument,
              {"n_dims 0"});
}

TEST(GgufFileErrorsTest, ZeroSizedDimension) {
  ExpectError(ParseStatus(GgufBuilder().TensorAt("t", {4, 0}, kF32, 0).Build()), absl::StatusCode::kInvalidArgument,
              {"tensor 't'", "ne[1] = 0", "must be positive"});
}

TEST(GgufFileErrorsTest, NegativeDimension) {
  ExpectError(ParseStatus(GgufBuilder().TensorAt("t", {-3}, kF32, 0).Build()), absl::StatusCode::kInvalidArgument,
              {"ne[0] = -3"});
}

TEST(GgufFileErrorsTest, ElementCountOverflow) {
  ExpectError(ParseStatus(GgufBuilder().TensorAt("t", {1 << 20, int64_t{1} << 40, int64_t{1} << 10}, kF32, 0).Build()),
              absl::StatusCode::kInvalidArgument, {"tensor 't'", "element count overflows"});
}

TEST(GgufFileErrorsTest, ByteSizeOverflow) {
  ExpectError(ParseStatus(GgufBuilder().TensorAt("t", {int64_t{1} << 62}, kF32, 0).Build()),
              absl::StatusCode::kInvalidArgument, {"tensor 't'", "byte size overflows"});
}

TEST(GgufFileErrorsTest, RowNotAMultipleOfTheBlockSize) {
  ExpectError(ParseStatus(GgufBuilder().TensorAt("q", {33, 2}, kQ8_0, 0).Build()), absl::StatusCode::kInvalidArgument,
              {"tensor 'q'", "row length 33", "block size 32", "Q8_0 (8)"});
}

TEST(GgufFileErrorsTest, DuplicateTensorName) {
  const std::string bytes =
      GgufBuilder().Tensor("w", {2}, kF32, test::F32Data({1, 2})).TensorAt("w", {2}, kF32, 0).Build();
  ExpectError(ParseStatus(bytes), absl::StatusCode::kInvalidArgument, {"duplicate tensor name 'w'"});
}

TEST(GgufFileErrorsTest, EmptyTensorName) {
  ExpectError(ParseStatus(GgufBuilder().TensorAt("", {1}, kF32, 0).Build()), absl::StatusCode::kInvalidArgument,
              {"empty tensor name"});
}

// Not a fuzzer, but a cheap deterministic stand-in that runs in every test
// run: random byte edits of a valid file must parse or fail, never crash,
// and whatever parses must be readable throughout.
TEST(GgufFileErrorsTest, RandomCorruptionNeverCrashes) {
  const std::string valid = ValidFile();
  std::mt19937 rng(1234);
  int parsed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bytes = valid;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      bytes[rng() % bytes.size()] = static_cast<char>(rng());
    }
    auto f = GgufFile::FromBuffer(bytes, "bad.gguf");
    if (!f.ok()) continue;
    ++parsed;
    for (const GgufKeyValue& kv : (*f)->metadata()) (void)FormatGgufValue(kv.value);
    for (const GgufTensorInfo& t : (*f)->tensor_infos()) {
      auto tensor = (*f)->FindTensor(t.name);
      if (tensor.ok()) {
        volatile uint8_t sink = 0;
        for (size_t i = 0; i < tensor->nbytes; ++i) sink = sink ^ tensor->data[i];
      }
    }
  }
  // Most single-byte edits land in tensor data or values and still parse.
  EXPECT_GT(parsed, 100);
}

}  // namespace
}  // namespace beacon
