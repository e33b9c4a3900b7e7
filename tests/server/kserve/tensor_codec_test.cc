// The KServe tensor codec: BYTES inputs raw (length-prefixed) and typed, checked against their
// shapes, and FP32 outputs raw (little-endian) and typed.
#include "server/kserve/tensor_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace dflash::kserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

inference::ModelInferRequest RequestWith(const std::vector<std::string>& elements,
                                         std::vector<int64_t> shape, bool raw) {
  inference::ModelInferRequest request;
  auto* input = request.add_inputs();
  input->set_name("text");
  input->set_datatype("BYTES");
  input->mutable_shape()->Add(shape.begin(), shape.end());
  if (raw) {
    request.add_raw_input_contents(EncodeRawBytes(elements));
  } else {
    for (const std::string& element : elements) {
      input->mutable_contents()->add_bytes_contents(element);
    }
  }
  return request;
}

TEST(KserveTensorCodecTest, RawBytesAreLittleEndianLengthPrefixed) {
  const std::vector<std::string> elements = {"ab", "", std::string(300, 'x')};
  const std::string raw = EncodeRawBytes(elements);
  ASSERT_EQ(raw.size(), 4u + 2 + 4 + 4 + 300);
  EXPECT_EQ(raw.substr(0, 6), std::string("\x02\x00\x00\x00"
                                          "ab",
                                          6));
  EXPECT_EQ(raw.substr(6, 4), std::string("\x00\x00\x00\x00", 4));
  EXPECT_EQ(raw.substr(10, 4), std::string("\x2c\x01\x00\x00", 4));  // 300
}

TEST(KserveTensorCodecTest, DecodesRawAndTypedBytesAlike) {
  const std::vector<std::string> elements = {"first", "", "café \xF0\x9F\x8E\x89"};
  for (const bool raw : {true, false}) {
    const inference::ModelInferRequest request = RequestWith(elements, {3}, raw);
    ASSERT_TRUE(CheckInputLayout(request).ok());
    absl::StatusOr<std::vector<absl::string_view>> decoded = DecodeBytesInput(request, 0);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_THAT(*decoded, ElementsAre("first", "", "café \xF0\x9F\x8E\x89"));
  }
}

TEST(KserveTensorCodecTest, ElementCountMustMatchTheShape) {
  for (const bool raw : {true, false}) {
    absl::StatusOr<std::vector<absl::string_view>> decoded =
        DecodeBytesInput(RequestWith({"a", "b"}, {3}, raw), 0);
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(decoded.status().message(),
                HasSubstr("input 'text': shape [3] holds 3 elements, but 2 were sent"));
  }
  EXPECT_TRUE(DecodeBytesInput(RequestWith({}, {0}, true), 0).ok());
  EXPECT_TRUE(DecodeBytesInput(RequestWith({"a", "b"}, {1, 2}, false), 0).ok());
}

TEST(KserveTensorCodecTest, MalformedRawBytesAreRejectedNamingTheInput) {
  inference::ModelInferRequest request = RequestWith({"abc"}, {1}, true);
  request.set_raw_input_contents(0, std::string("\x03\x00\x00", 3));
  EXPECT_THAT(DecodeBytesInput(request, 0).status().message(),
              HasSubstr("input 'text': raw BYTES data ends inside the length of element 0"));
  request.set_raw_input_contents(0, std::string("\xff\xff\xff\xff"
                                                "abc",
                                                7));
  EXPECT_THAT(DecodeBytesInput(request, 0).status().message(),
              HasSubstr("element 0 declares 4294967295 bytes, but only 3 follow"));
}

TEST(KserveTensorCodecTest, DatatypeAndShapeAreChecked) {
  inference::ModelInferRequest request = RequestWith({"a"}, {1}, false);
  request.mutable_inputs(0)->set_datatype("FP32");
  EXPECT_THAT(DecodeBytesInput(request, 0).status().message(),
              HasSubstr("input 'text': datatype 'FP32', expected BYTES"));
  const int64_t negative[] = {-1};
  EXPECT_EQ(ShapeElements(negative, "text").status().code(), absl::StatusCode::kInvalidArgument);
  const int64_t huge[] = {std::numeric_limits<int64_t>::max(), 2};
  EXPECT_THAT(ShapeElements(huge, "text").status().message(), HasSubstr("too large"));
  const int64_t empty_dimension[] = {0, std::numeric_limits<int64_t>::max()};
  EXPECT_EQ(*ShapeElements(empty_dimension, "text"), 0);
}

TEST(KserveTensorCodecTest, InputsAreAllRawOrAllTyped) {
  inference::ModelInferRequest request = RequestWith({"a"}, {1}, true);
  auto* typed = request.add_inputs();
  typed->set_name("text_pair");
  EXPECT_THAT(CheckInputLayout(request).message(),
              HasSubstr("raw_input_contents has 1 entries for 2 inputs"));
  request.add_raw_input_contents("");
  typed->mutable_contents()->add_bytes_contents("b");
  EXPECT_THAT(CheckInputLayout(request).message(),
              HasSubstr("input 'text_pair': has contents while"));
}

TEST(KserveTensorCodecTest, Fp32OutputsRoundTripRawAndTyped) {
  const std::vector<float> values = {1.0f, -2.5f, 0.0f, 3.25e-8f};
  const int64_t shape[] = {2, 2};
  inference::ModelInferResponse raw;
  AddFp32Output("scores", shape, values, /*raw=*/true, raw);
  ASSERT_EQ(raw.raw_output_contents_size(), 1);
  EXPECT_EQ(raw.raw_output_contents(0).substr(0, 8),
            std::string("\x00\x00\x80\x3f\x00\x00\x20\xc0", 8));  // 1.0f, -2.5f little-endian
  EXPECT_EQ(*DecodeFp32Output(raw, 0), values);
  EXPECT_THAT(raw.outputs(0).shape(), ElementsAre(2, 2));
  EXPECT_EQ(raw.outputs(0).datatype(), "FP32");
  inference::ModelInferResponse typed;
  AddFp32Output("scores", shape, values, /*raw=*/false, typed);
  EXPECT_EQ(typed.raw_output_contents_size(), 0);
  EXPECT_EQ(*DecodeFp32Output(typed, 0), values);
}

}  // namespace
}  // namespace dflash::kserve
