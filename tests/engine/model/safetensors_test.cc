// engine/model/safetensors.{h,cc}: writer -> reader round trips and header validation.
#include "engine/model/safetensors.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/half_precision.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tiny_checkpoint.h"

namespace dflash {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A file made of a length prefix, `json` and `data`.
std::string FileWithHeader(absl::string_view json, absl::string_view data = "") {
  std::string file(8, '\0');
  const uint64_t length = json.size();
  std::memcpy(file.data(), &length, 8);
  file.append(json.data(), json.size());
  file.append(data.data(), data.size());
  return file;
}

std::string LengthPrefix(uint64_t length) {
  std::string prefix(8, '\0');
  std::memcpy(prefix.data(), &length, 8);
  return prefix;
}

template <typename T>
std::string BytesOf(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

class SafetensorsFileTest : public ::testing::Test {
 protected:
  std::unique_ptr<SafetensorsFile> WriteAndOpen(const SafetensorsWriter& writer,
                                                const std::string& name = "model.safetensors") {
    const fs::path path = dir_.path() / name;
    const absl::Status written = writer.WriteFile(path);
    EXPECT_TRUE(written.ok()) << written;
    EXPECT_FALSE(fs::exists(path.string() + ".partial"));
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
    EXPECT_TRUE(file.ok()) << file.status();
    return file.ok() ? *std::move(file) : nullptr;
  }

  test::ScopedTempDir dir_;
};

TEST_F(SafetensorsFileTest, FloatRoundTripInEveryStoredDType) {
  const std::vector<float> values = {0.0f,   -0.0f,   1.0f,         -2.5f,           0.1f,
                                     1e-6f,  65504.f, 3.14159265f,  -1234.5678f,     1e30f,
                                     1e-30f, 7.0f,    0.333333343f, -65520.0f + 1.0f};
  SafetensorsWriter writer;
  writer.AddFloat("f32", {2, 7}, values, DType::kF32);
  writer.AddFloat("f16", {14}, values, DType::kF16);
  writer.AddFloat("bf16", {7, 2}, values, DType::kBF16);
  writer.AddFloat("f64", {1, 14}, values, DType::kF64);
  std::unique_ptr<SafetensorsFile> file = WriteAndOpen(writer);
  ASSERT_NE(file, nullptr);

  ASSERT_EQ(file->tensors().size(), 4u);
  // Sorted by name.
  EXPECT_EQ(file->tensors()[0].name, "bf16");
  EXPECT_EQ(file->tensors()[1].name, "f16");
  EXPECT_EQ(file->tensors()[2].name, "f32");
  EXPECT_EQ(file->tensors()[3].name, "f64");

  const TensorInfo* f32 = file->Find("f32");
  const TensorInfo* f16 = file->Find("f16");
  const TensorInfo* bf16 = file->Find("bf16");
  const TensorInfo* f64 = file->Find("f64");
  ASSERT_TRUE(f32 && f16 && bf16 && f64);
  EXPECT_EQ(file->Find("f8"), nullptr);
  EXPECT_EQ(file->Find("f3"), nullptr);
  EXPECT_EQ(f32->dtype, DType::kF32);
  EXPECT_EQ(f16->dtype, DType::kF16);
  EXPECT_EQ(bf16->dtype, DType::kBF16);
  EXPECT_EQ(f64->dtype, DType::kF64);
  EXPECT_THAT(f32->shape, ElementsAre(2, 7));
  EXPECT_THAT(bf16->shape, ElementsAre(7, 2));
  EXPECT_EQ(f32->end - f32->begin, 14u * 4);
  EXPECT_EQ(f16->end - f16->begin, 14u * 2);
  EXPECT_EQ(bf16->end - bf16->begin, 14u * 2);
  EXPECT_EQ(f64->end - f64->begin, 14u * 8);
  EXPECT_EQ(file->RawBytes(*f32), BytesOf(values));

  absl::StatusOr<std::vector<float>> read_f32 = file->ReadFloat32(*f32);
  absl::StatusOr<std::vector<float>> read_f16 = file->ReadFloat32(*f16);
  absl::StatusOr<std::vector<float>> read_bf16 = file->ReadFloat32(*bf16);
  absl::StatusOr<std::vector<float>> read_f64 = file->ReadFloat32(*f64);
  ASSERT_TRUE(read_f32.ok()) << read_f32.status();
  ASSERT_TRUE(read_f16.ok()) << read_f16.status();
  ASSERT_TRUE(read_bf16.ok()) << read_bf16.status();
  ASSERT_TRUE(read_f64.ok()) << read_f64.status();
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>((*read_f32)[i]), std::bit_cast<uint32_t>(values[i])) << i;
    EXPECT_EQ(std::bit_cast<uint32_t>((*read_f64)[i]), std::bit_cast<uint32_t>(values[i])) << i;
    EXPECT_EQ(std::bit_cast<uint32_t>((*read_f16)[i]),
              std::bit_cast<uint32_t>(HalfToFloat(FloatToHalf(values[i]))))
        << i;
    EXPECT_EQ(std::bit_cast<uint32_t>((*read_bf16)[i]),
              std::bit_cast<uint32_t>(BFloat16ToFloat(FloatToBFloat16(values[i]))))
        << i;
  }
  // Spot checks of the narrowing itself.
  EXPECT_EQ((*read_f16)[4], HalfToFloat(0x2e66));  // 0.1
  EXPECT_EQ((*read_f16)[9], std::numeric_limits<float>::infinity());
  EXPECT_EQ((*read_f16)[10], 0.0f);
  EXPECT_EQ((*read_bf16)[2], 1.0f);
  EXPECT_EQ((*read_bf16)[3], -2.5f);
}

TEST_F(SafetensorsFileTest, IntegerRoundTripAndScalarShape) {
  const std::vector<int64_t> values = {0, 1, -1, std::numeric_limits<int32_t>::max(),
                                       std::numeric_limits<int32_t>::min()};
  const std::vector<int64_t> wide = {std::numeric_limits<int64_t>::min(), -5,
                                     std::numeric_limits<int64_t>::max()};
  SafetensorsWriter writer;
  writer.AddInt("i32", {5}, values, DType::kI32);
  writer.AddInt("i64", {3}, wide, DType::kI64);
  const std::vector<float> scalar = {42.5f};
  writer.AddFloat("scalar", {}, scalar);
  const std::vector<int64_t> scalar_int = {-7};
  writer.AddInt("scalar_int", {}, scalar_int);
  std::unique_ptr<SafetensorsFile> file = WriteAndOpen(writer);
  ASSERT_NE(file, nullptr);

  const TensorInfo* i32 = file->Find("i32");
  const TensorInfo* i64 = file->Find("i64");
  const TensorInfo* s = file->Find("scalar");
  const TensorInfo* si = file->Find("scalar_int");
  ASSERT_TRUE(i32 && i64 && s && si);
  EXPECT_EQ(i32->dtype, DType::kI32);
  EXPECT_EQ(i64->dtype, DType::kI64);
  EXPECT_EQ(i32->end - i32->begin, 20u);
  absl::StatusOr<std::vector<int64_t>> read_i32 = file->ReadInt64(*i32);
  absl::StatusOr<std::vector<int64_t>> read_i64 = file->ReadInt64(*i64);
  ASSERT_TRUE(read_i32.ok()) << read_i32.status();
  ASSERT_TRUE(read_i64.ok()) << read_i64.status();
  EXPECT_EQ(*read_i32, values);
  EXPECT_EQ(*read_i64, wide);

  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->NumElements(), 1);
  EXPECT_EQ(s->end - s->begin, 4u);
  absl::StatusOr<std::vector<float>> read_scalar = file->ReadFloat32(*s);
  ASSERT_TRUE(read_scalar.ok()) << read_scalar.status();
  EXPECT_THAT(*read_scalar, ElementsAre(42.5f));
  absl::StatusOr<std::vector<int64_t>> read_scalar_int = file->ReadInt64(*si);
  ASSERT_TRUE(read_scalar_int.ok()) << read_scalar_int.status();
  EXPECT_THAT(*read_scalar_int, ElementsAre(-7));
}

TEST_F(SafetensorsFileTest, EmptyTensorsAndMetadata) {
  SafetensorsWriter writer;
  writer.AddFloat("empty", {0, 3}, std::vector<float>{});
  writer.AddFloat("one", {1}, std::vector<float>{2.0f});
  writer.AddRaw("empty_f16", DType::kF16, {3, 0}, "");
  writer.SetMetadata("format", "pt");
  writer.SetMetadata("note", "tiny");
  std::unique_ptr<SafetensorsFile> file = WriteAndOpen(writer);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->metadata().size(), 2u);
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->metadata().at("note"), "tiny");
  const TensorInfo* empty = file->Find("empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->NumElements(), 0);
  EXPECT_EQ(empty->begin, empty->end);
  EXPECT_EQ(file->RawBytes(*empty).size(), 0u);
  const TensorInfo* empty_f16 = file->Find("empty_f16");
  ASSERT_NE(empty_f16, nullptr);
  absl::StatusOr<std::vector<float>> values = file->ReadFloat32(*empty_f16);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_TRUE(values->empty());
  absl::StatusOr<std::vector<float>> one = file->ReadFloat32(*file->Find("one"));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT(*one, ElementsAre(2.0f));
}

// Regression: an F32 tensor with zero elements used to memcpy into an empty vector's null data
// pointer, which UBSan reports as undefined behaviour.
TEST_F(SafetensorsFileTest, ReadFloat32OfAnEmptyF32TensorIsDefined) {
  SafetensorsWriter writer;
  writer.AddFloat("empty", {0, 3}, std::vector<float>{});
  std::unique_ptr<SafetensorsFile> file = WriteAndOpen(writer);
  ASSERT_NE(file, nullptr);
  absl::StatusOr<std::vector<float>> values = file->ReadFloat32(*file->Find("empty"));
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_TRUE(values->empty());
}

// Regression (review): an empty tensor whose other extents multiply past int64 passed
// validation (0 bytes) and NumElements() then overflowed.
TEST(SafetensorsHeaderTest, EmptyTensorWithHugeExtentsHasZeroElements) {
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(
      FileWithHeader(
          R"({"e":{"dtype":"U8","shape":[4611686018427387904,2,0],"data_offsets":[0,0]}})"),
      "empty.safetensors");
  ASSERT_TRUE(header.ok()) << header.status();
  ASSERT_EQ(header->tensors.size(), 1u);
  EXPECT_EQ(header->tensors[0].NumElements(), 0);
}

TEST(SafetensorsWriterTest, PadsTheHeaderWithSpacesTo8Bytes) {
  std::set<uint64_t> paddings_seen;
  for (int length = 1; length <= 16; ++length) {
    SafetensorsWriter writer;
    writer.AddFloat(std::string(static_cast<size_t>(length), 'a'), {1}, std::vector<float>{1.0f});
    const std::string file = writer.Serialize();
    uint64_t header_length = 0;
    std::memcpy(&header_length, file.data(), 8);
    EXPECT_EQ(header_length % 8, 0u) << length;
    ASSERT_EQ(file.size(), 8 + header_length + 4) << length;
    const std::string header = file.substr(8, header_length);
    const size_t last = header.find_last_not_of(' ');
    ASSERT_NE(last, std::string::npos);
    EXPECT_EQ(header[last], '}') << header;
    paddings_seen.insert(header_length - 1 - last);
    absl::StatusOr<SafetensorsHeader> parsed = ParseSafetensorsHeader(file, "padded");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->data_offset, 8 + header_length);
    EXPECT_EQ(parsed->data_offset % 8, 0u);
  }
  EXPECT_EQ(paddings_seen.size(), 8u);  // Every padding 0..7 occurred.
}

TEST(SafetensorsHeaderTest, AcceptsAHandWrittenFile) {
  // As transformers writes it: sorted names, metadata, padding.
  const std::string data =
      BytesOf(std::vector<float>{1, 2, 3, 4, 5, 6}) + BytesOf(std::vector<int64_t>{7, 8});
  const std::string json =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"I64","shape":[2],"data_offsets":[24,40]}})";
  absl::StatusOr<SafetensorsHeader> header =
      ParseSafetensorsHeader(FileWithHeader(json, data), "hand.safetensors");
  ASSERT_TRUE(header.ok()) << header.status();
  ASSERT_EQ(header->tensors.size(), 2u);
  EXPECT_EQ(header->tensors[0].name, "a");
  EXPECT_THAT(header->tensors[0].shape, ElementsAre(2, 3));
  EXPECT_EQ(header->tensors[1].begin, 24u);
  EXPECT_EQ(header->tensors[1].end, 40u);
  EXPECT_EQ(header->data_offset, 8 + json.size());
  EXPECT_EQ(header->metadata.at("format"), "pt");
}

TEST(SafetensorsHeaderTest, TensorsMayBeListedOutOfOffsetOrderAndBeEmpty) {
  const std::string data(12, '\0');
  const std::string json = R"({"z":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
                           R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})";
  absl::StatusOr<SafetensorsHeader> header =
      ParseSafetensorsHeader(FileWithHeader(json, data), "order");
  ASSERT_TRUE(header.ok()) << header.status();
  ASSERT_EQ(header->tensors.size(), 3u);
  EXPECT_EQ(header->tensors[0].name, "a");
  EXPECT_EQ(header->tensors[1].name, "e");
  EXPECT_EQ(header->tensors[2].name, "z");
}

struct MalformedCase {
  std::string label;
  std::string file;
  std::vector<std::string> message_parts;
};

void PrintTo(const MalformedCase& c, std::ostream* os) { *os << c.label; }

std::string Entry(absl::string_view name, absl::string_view body) {
  return absl::StrCat("\"", name, "\":{", body, "}");
}

std::vector<MalformedCase> MalformedCases() {
  const std::string data16(16, '\x01');
  std::vector<MalformedCase> cases = {
      {"empty_file", "", {"file is 0 bytes", "shorter than the 8-byte length prefix"}},
      {"seven_bytes", std::string(7, '\0'), {"file is 7 bytes"}},
      {"header_past_end", LengthPrefix(100) + "{}", {"header length 100", "truncated"}},
      {"header_length_max",
       LengthPrefix(std::numeric_limits<uint64_t>::max()) + "{}",
       {"exceeds the limit of 100000000 bytes"}},
      {"header_over_100mb",
       LengthPrefix(100'000'001) + "{}",
       {"header length 100000001", "exceeds the limit"}},
      {"header_too_short", FileWithHeader("{"), {"header is shorter"}},
      {"not_json", FileWithHeader("{not json}"), {"invalid JSON"}},
      {"trailing_garbage", FileWithHeader("{} x"), {"invalid JSON"}},
      {"json_array", FileWithHeader("[1, 2]"), {"header is not a JSON object"}},
      {"json_string", FileWithHeader("\"abc\""), {"header is not a JSON object"}},
      {"entry_not_object", FileWithHeader(R"({"w":[1]})"), {"tensor 'w'", "not an object"}},
      {"unknown_dtype",
       FileWithHeader(
           absl::StrCat("{", Entry("w", R"("dtype":"F17","shape":[4],"data_offsets":[0,16])"), "}"),
           data16),
       {"tensor 'w'", "unknown dtype \"F17\""}},
      {"lowercase_dtype",
       FileWithHeader(
           absl::StrCat("{", Entry("w", R"("dtype":"f32","shape":[4],"data_offsets":[0,16])"), "}"),
           data16),
       {"tensor 'w'", "unknown dtype \"f32\""}},
      {"missing_dtype",
       FileWithHeader(absl::StrCat("{", Entry("w", R"("shape":[4],"data_offsets":[0,16])"), "}"),
                      data16),
       {"tensor 'w'", "missing string field 'dtype'"}},
      {"dtype_not_string",
       FileWithHeader(
           absl::StrCat("{", Entry("w", R"("dtype":7,"shape":[4],"data_offsets":[0,16])"), "}"),
           data16),
       {"tensor 'w'", "'dtype'"}},
      {"missing_shape",
       FileWithHeader(absl::StrCat("{", Entry("w", R"("dtype":"F32","data_offsets":[0,16])"), "}"),
                      data16),
       {"tensor 'w'", "missing array field 'shape'"}},
      {"shape_not_array",
       FileWithHeader(
           absl::StrCat("{", Entry("w", R"("dtype":"F32","shape":4,"data_offsets":[0,16])"), "}"),
           data16),
       {"tensor 'w'", "'shape'"}},
      {"missing_offsets",
       FileWithHeader(absl::StrCat("{", Entry("w", R"("dtype":"F32","shape":[4])"), "}"), data16),
       {"tensor 'w'", "'data_offsets' must be [begin, end]"}},
      {"offsets_three_entries",
       FileWithHeader(
           absl::StrCat("{", Entry("w", R"("dtype":"F32","shape":[4],"data_offsets":[0,8,16])"),
                        "}"),
           data16),
       {"tensor 'w'", "'data_offsets'"}},
      {"negative_offset",
       FileWithHeader(
           absl::StrCat("{", Entry("w", R"("dtype":"F32","shape":[4],"data_offsets":[-16,0])"),
                        "}"),
           data16),
       {"tensor 'w'", "'data_offsets'"}},
      {"negative_shape",
       FileWithHeader(
           absl::StrCat("{", Entry("w", R"("dtype":"F32","shape":[-4],"data_offsets":[0,16])"),
                        "}"),
           data16),
       {"tensor 'w'", "shape entries must be non-negative integers, got -4"}},
      {"float_shape",
       FileWithHeader(
           absl::StrCat("{", Entry("w", R"("dtype":"F32","shape":[2.5],"data_offsets":[0,16])"),
                        "}"),
           data16),
       {"tensor 'w'", "non-negative integers, got 2.5"}},
      {"float_shape_integral",
       FileWithHeader(
           absl::StrCat("{", Entry("w", R"("dtype":"F32","shape":[4.0],"data_offsets":[0,16])"),
                        "}"),
           data16),
       {"tensor 'w'", "non-negative integers"}},
      {"string_shape",
       FileWithHeader(
           absl::StrCat("{", Entry("w", R"("dtype":"F32","shape":["4"],"data_offsets":[0,16])"),
                        "}"),
           data16),
       {"tensor 'w'", "non-negative integers, got \"4\""}},
      {"reversed_offsets",
       FileWithHeader(
           absl::StrCat("{", Entry("w", R"("dtype":"F32","shape":[4],"data_offsets":[16,0])"), "}"),
           data16),
       {"tensor 'w'", "data_offsets [16, 0] are reversed"}},
      {"offsets_past_data",
       FileWithHeader(
           absl::StrCat("{", Entry("w", R"("dtype":"F32","shape":[5],"data_offsets":[0,20])"), "}"),
           data16),
       {"tensor 'w'", "end past the data section (16 bytes)"}},
      {"size_mismatch",
       FileWithHeader(
           absl::StrCat("{", Entry("w", R"("dtype":"F32","shape":[3],"data_offsets":[0,16])"), "}"),
           data16),
       {"tensor 'w'", "shape [3] of F32 needs 12 bytes but data_offsets span 16"}},
      {"size_mismatch_f16",
       FileWithHeader(
           absl::StrCat("{", Entry("w", R"("dtype":"F16","shape":[2,2],"data_offsets":[0,16])"),
                        "}"),
           data16),
       {"tensor 'w'", "shape [2, 2] of F16 needs 8 bytes"}},
      {"shape_overflows_64_bits",
       FileWithHeader(
           absl::StrCat(
               "{",
               Entry("w", R"("dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16])"),
               "}"),
           data16),
       {"tensor 'w'", "shape is too large"}},
      {"shape_overflows_with_itemsize",
       FileWithHeader(
           absl::StrCat(
               "{",
               Entry("w", R"("dtype":"I64","shape":[2305843009213693952,2],"data_offsets":[0,16])"),
               "}"),
           data16),
       {"tensor 'w'", "shape is too large"}},
      {"shape_extent_above_int64",
       FileWithHeader(
           absl::StrCat(
               "{",
               Entry("w", R"("dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,16])"),
               "}"),
           data16),
       {"tensor 'w'", "shape is too large"}},
      {"overlapping_tensors",
       FileWithHeader(
           absl::StrCat("{", Entry("a", R"("dtype":"F32","shape":[3],"data_offsets":[0,12])"), ",",
                        Entry("b", R"("dtype":"F32","shape":[2],"data_offsets":[8,16])"), "}"),
           data16),
       {"tensor 'b'", "data overlaps tensor 'a'"}},
      {"identical_ranges",
       FileWithHeader(
           absl::StrCat("{", Entry("a", R"("dtype":"F32","shape":[4],"data_offsets":[0,16])"), ",",
                        Entry("b", R"("dtype":"I32","shape":[4],"data_offsets":[0,16])"), "}"),
           data16),
       {"overlaps"}},
      {"duplicate_tensor_names",
       FileWithHeader(
           absl::StrCat("{", Entry("a", R"("dtype":"F32","shape":[2],"data_offsets":[0,8])"), ",",
                        Entry("a", R"("dtype":"F32","shape":[2],"data_offsets":[8,16])"), "}"),
           data16),
       {"invalid JSON", "duplicate key \"a\""}},
      {"deeply_nested",
       FileWithHeader(R"({"a":{"dtype":"F32","shape":[[[[[1]]]]],"data_offsets":[0,4]}})", data16),
       {"invalid JSON", "nesting deeper than"}},
      {"unknown_field",
       FileWithHeader(
           absl::StrCat(
               "{", Entry("w", R"("dtype":"F32","shape":[4],"data_offsets":[0,16],"strides":[1])"),
               "}"),
           data16),
       {"tensor 'w'", "unknown field 'strides'"}},
      {"metadata_not_object",
       FileWithHeader(R"({"__metadata__":"pt"})"),
       {"'__metadata__' is not an object"}},
      {"metadata_value_not_string",
       FileWithHeader(R"({"__metadata__":{"format":1}})"),
       {"'__metadata__' value for 'format' is not a string"}},
      {"metadata_nested_object",
       FileWithHeader(R"({"__metadata__":{"format":{"x":"y"}}})"),
       {"'__metadata__' value for 'format' is not a string"}},
  };
  return cases;
}

class MalformedHeaderTest : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedHeaderTest, IsInvalidArgumentNamingFileAndProblem) {
  const MalformedCase& c = GetParam();
  absl::StatusOr<SafetensorsHeader> header =
      ParseSafetensorsHeader(c.file, "/models/broken/model.safetensors");
  ASSERT_FALSE(header.ok()) << c.label;
  EXPECT_EQ(header.status().code(), absl::StatusCode::kInvalidArgument) << header.status();
  EXPECT_THAT(header.status().message(), HasSubstr("/models/broken/model.safetensors"));
  for (const std::string& part : c.message_parts) {
    EXPECT_THAT(header.status().message(), HasSubstr(part));
  }
}

INSTANTIATE_TEST_SUITE_P(Table, MalformedHeaderTest, ::testing::ValuesIn(MalformedCases()),
                         [](const ::testing::TestParamInfo<MalformedCase>& param_info) {
                           return param_info.param.label;
                         });

TEST(SafetensorsHeaderTest, JsonErrorCarriesAPosition) {
  absl::StatusOr<SafetensorsHeader> header =
      ParseSafetensorsHeader(FileWithHeader("{\n \"a\": nope}"), "pos.safetensors");
  // Line 2 is ` "a": nope}`; the literal goes wrong at its second character, column 8.
  ASSERT_FALSE(header.ok());
  EXPECT_THAT(header.status().message(), HasSubstr("pos.safetensors (header):2:8: invalid JSON"));
}

TEST_F(SafetensorsFileTest, OpenReportsTheFileOnDiskInErrors) {
  const fs::path path = dir_.path() / "truncated.safetensors";
  SafetensorsWriter writer;
  writer.AddFloat("w", {4}, std::vector<float>{1, 2, 3, 4});
  std::string bytes = writer.Serialize();
  bytes.resize(bytes.size() - 3);
  ASSERT_TRUE(test::WriteTextFile(path, bytes).ok());
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(), HasSubstr(path.string()));
  EXPECT_THAT(file.status().message(), HasSubstr("tensor 'w'"));
  EXPECT_THAT(file.status().message(), HasSubstr("end past the data section (13 bytes)"));
}

TEST_F(SafetensorsFileTest, OpenEmptyFileIsInvalidArgument) {
  const fs::path path = dir_.path() / "empty.safetensors";
  ASSERT_TRUE(test::WriteTextFile(path, "").ok());
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(), HasSubstr(path.string()));
  EXPECT_THAT(file.status().message(), HasSubstr("file is 0 bytes"));
}

TEST_F(SafetensorsFileTest, OpenMissingFileIsNotFoundNamingIt) {
  const fs::path path = dir_.path() / "absent.safetensors";
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound) << file.status();
  EXPECT_THAT(file.status().message(), HasSubstr(path.string()));
}

TEST_F(SafetensorsFileTest, OpenDirectoryIsAnError) {
  const fs::path path = dir_.path() / "model.safetensors";
  fs::create_directory(path);
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  EXPECT_THAT(file.status().message(), HasSubstr(path.string()));
  EXPECT_THAT(file.status().message(), HasSubstr("not a regular file"));
}

TEST_F(SafetensorsFileTest, ReadFloat32OfAnIntegerTensorNamesIt) {
  SafetensorsWriter writer;
  writer.AddInt("position_ids", {3}, std::vector<int64_t>{0, 1, 2});
  std::unique_ptr<SafetensorsFile> file = WriteAndOpen(writer);
  ASSERT_NE(file, nullptr);
  const TensorInfo* info = file->Find("position_ids");
  ASSERT_NE(info, nullptr);
  absl::StatusOr<std::vector<float>> values = file->ReadFloat32(*info);
  ASSERT_FALSE(values.ok());
  EXPECT_EQ(values.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(values.status().message(), HasSubstr("model.safetensors"));
  EXPECT_THAT(values.status().message(), HasSubstr("tensor 'position_ids'"));
  EXPECT_THAT(values.status().message(), HasSubstr("dtype I64"));
}

TEST_F(SafetensorsFileTest, ReadInt64OfAFloatTensorNamesIt) {
  SafetensorsWriter writer;
  writer.AddFloat("weights", {2}, std::vector<float>{1.0f, 2.0f});
  std::unique_ptr<SafetensorsFile> file = WriteAndOpen(writer);
  ASSERT_NE(file, nullptr);
  absl::StatusOr<std::vector<int64_t>> values = file->ReadInt64(*file->Find("weights"));
  ASSERT_FALSE(values.ok());
  EXPECT_EQ(values.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(values.status().message(), HasSubstr("tensor 'weights'"));
  EXPECT_THAT(values.status().message(), HasSubstr("dtype F32"));
}

TEST_F(SafetensorsFileTest, ReadInt64WidensNarrowIntegers) {
  SafetensorsWriter writer;
  writer.AddRaw("i8", DType::kI8, {4}, BytesOf(std::vector<int8_t>{-128, -1, 0, 127}));
  writer.AddRaw("u8", DType::kU8, {3}, BytesOf(std::vector<uint8_t>{0, 128, 255}));
  writer.AddRaw("i16", DType::kI16, {3}, BytesOf(std::vector<int16_t>{-32768, -2, 32767}));
  writer.AddRaw("u16", DType::kU16, {2}, BytesOf(std::vector<uint16_t>{0, 65535}));
  writer.AddRaw("i32", DType::kI32, {3},
                BytesOf(std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -3,
                                             std::numeric_limits<int32_t>::max()}));
  writer.AddRaw("u32", DType::kU32, {1}, BytesOf(std::vector<uint32_t>{4294967295u}));
  writer.AddRaw("bool", DType::kBool, {2}, BytesOf(std::vector<uint8_t>{1, 0}));
  // A 1-byte tensor first makes every following tensor misaligned in the data section.
  writer.AddRaw("a_odd", DType::kI16, {1}, BytesOf(std::vector<int16_t>{-300}));
  std::unique_ptr<SafetensorsFile> file = WriteAndOpen(writer);
  ASSERT_NE(file, nullptr);
  auto read = [&](const std::string& name) {
    const TensorInfo* info = file->Find(name);
    EXPECT_NE(info, nullptr) << name;
    absl::StatusOr<std::vector<int64_t>> values = file->ReadInt64(*info);
    EXPECT_TRUE(values.ok()) << values.status();
    return values.ok() ? *values : std::vector<int64_t>{};
  };
  EXPECT_THAT(read("i8"), ElementsAre(-128, -1, 0, 127));
  EXPECT_THAT(read("u8"), ElementsAre(0, 128, 255));
  EXPECT_THAT(read("i16"), ElementsAre(-32768, -2, 32767));
  EXPECT_THAT(read("u16"), ElementsAre(0, 65535));
  EXPECT_THAT(read("i32"), ElementsAre(std::numeric_limits<int32_t>::min(), -3,
                                       std::numeric_limits<int32_t>::max()));
  EXPECT_THAT(read("u32"), ElementsAre(4294967295ll));
  EXPECT_THAT(read("bool"), ElementsAre(1, 0));
  EXPECT_THAT(read("a_odd"), ElementsAre(-300));
}

TEST(SafetensorsDTypeTest, NamesSizesAndParsing) {
  const std::vector<std::pair<std::string, size_t>> expected = {
      {"BOOL", 1}, {"U8", 1},   {"I8", 1},  {"I16", 2},     {"U16", 2},
      {"F16", 2},  {"BF16", 2}, {"I32", 4}, {"U32", 4},     {"F32", 4},
      {"I64", 8},  {"U64", 8},  {"F64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  for (const auto& [name, size] : expected) {
    const std::optional<DType> dtype = ParseDType(name);
    ASSERT_TRUE(dtype.has_value()) << name;
    EXPECT_EQ(DTypeName(*dtype), name);
    EXPECT_EQ(DTypeSize(*dtype), size) << name;
  }
  EXPECT_FALSE(ParseDType("F128").has_value());
  EXPECT_FALSE(ParseDType("").has_value());
  EXPECT_FALSE(ParseDType("bf16").has_value());
}

}  // namespace
}  // namespace dflash
