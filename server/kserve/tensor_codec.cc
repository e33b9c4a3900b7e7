#include "server/kserve/tensor_codec.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dflash::kserve {
namespace {

constexpr char kBytes[] = "BYTES";
constexpr char kFp32[] = "FP32";

// The protocol's integers and floats are little-endian whatever the host's order.
uint32_t LoadLittleEndian32(const char* bytes) {
  const auto* u = reinterpret_cast<const unsigned char*>(bytes);
  return uint32_t{u[0]} | uint32_t{u[1]} << 8 | uint32_t{u[2]} << 16 | uint32_t{u[3]} << 24;
}
void StoreLittleEndian32(char* bytes, uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

std::string ShapeString(std::span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// The raw BYTES elements of `data`, viewing it.
absl::StatusOr<std::vector<absl::string_view>> DecodeRawBytes(absl::string_view data,
                                                              absl::string_view tensor) {
  std::vector<absl::string_view> elements;
  while (!data.empty()) {
    if (data.size() < 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", tensor, "': raw BYTES data ends inside the length of element ",
                       elements.size()));
    }
    const uint32_t length = LoadLittleEndian32(data.data());
    data.remove_prefix(4);
    if (length > data.size()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", tensor, "': raw BYTES element ",
                                                     elements.size(), " declares ", length,
                                                     " bytes, but only ", data.size(), " follow"));
    }
    elements.push_back(data.substr(0, length));
    data.remove_prefix(length);
  }
  return elements;
}

}  // namespace

absl::StatusOr<int64_t> ShapeElements(std::span<const int64_t> shape, absl::string_view tensor) {
  int64_t elements = 1;
  for (const int64_t dimension : shape) {
    if (dimension < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", tensor, "': shape ", ShapeString(shape), " has a negative dimension"));
    }
    if (dimension != 0 && elements > std::numeric_limits<int64_t>::max() / dimension) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", tensor, "': shape ", ShapeString(shape), " is too large"));
    }
    elements *= dimension;
  }
  return elements;
}

absl::Status CheckInputLayout(const inference::ModelInferRequest& request) {
  if (request.raw_input_contents_size() == 0) return absl::OkStatus();
  if (request.raw_input_contents_size() != request.inputs_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("raw_input_contents has ", request.raw_input_contents_size(), " entries for ",
                     request.inputs_size(),
                     " inputs; send every input raw (one entry each, in input order) or none"));
  }
  for (const auto& input : request.inputs()) {
    if (input.has_contents()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", input.name(),
                       "': has contents while the request's inputs are sent in "
                       "raw_input_contents; use one or the other"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<absl::string_view>> DecodeBytesInput(
    const inference::ModelInferRequest& request, int index) {
  const auto& input = request.inputs(index);
  if (input.datatype() != kBytes) {
    return absl::InvalidArgumentError(absl::StrCat("input '", input.name(), "': datatype '",
                                                   input.datatype(), "', expected BYTES"));
  }
  absl::StatusOr<int64_t> expected =
      ShapeElements(std::span(input.shape().data(), input.shape().size()), input.name());
  if (!expected.ok()) return expected.status();
  std::vector<absl::string_view> elements;
  if (request.raw_input_contents_size() > 0) {
    absl::StatusOr<std::vector<absl::string_view>> raw =
        DecodeRawBytes(request.raw_input_contents(index), input.name());
    if (!raw.ok()) return raw.status();
    elements = std::move(*raw);
  } else {
    const auto& contents = input.contents();
    elements.reserve(static_cast<size_t>(contents.bytes_contents_size()));
    for (const std::string& element : contents.bytes_contents()) elements.push_back(element);
  }
  if (static_cast<int64_t>(elements.size()) != *expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("input '", input.name(), "': shape ",
                     ShapeString(std::span(input.shape().data(), input.shape().size())), " holds ",
                     *expected, " elements, but ", elements.size(), " were sent"));
  }
  return elements;
}

std::string EncodeRawBytes(std::span<const std::string> elements) {
  size_t size = 0;
  for (const std::string& element : elements) size += 4 + element.size();
  std::string raw;
  raw.reserve(size);
  for (const std::string& element : elements) {
    char length[4];
    StoreLittleEndian32(length, static_cast<uint32_t>(element.size()));
    raw.append(length, sizeof(length));
    raw.append(element);
  }
  return raw;
}

void AddFp32Output(absl::string_view name, std::span<const int64_t> shape,
                   std::span<const float> values, bool raw,
                   inference::ModelInferResponse& response) {
  auto* output = response.add_outputs();
  output->set_name(std::string(name));
  output->set_datatype(kFp32);
  output->mutable_shape()->Add(shape.begin(), shape.end());
  if (raw) {
    std::string* bytes = response.add_raw_output_contents();
    bytes->resize(values.size() * sizeof(float));
    char* out = bytes->data();
    for (const float value : values) {
      uint32_t bits;
      std::memcpy(&bits, &value, sizeof(bits));
      StoreLittleEndian32(out, bits);
      out += sizeof(bits);
    }
  } else {
    output->mutable_contents()->mutable_fp32_contents()->Add(values.begin(), values.end());
  }
}

absl::StatusOr<std::vector<float>> DecodeFp32Output(const inference::ModelInferResponse& response,
                                                    int index) {
  const auto& output = response.outputs(index);
  if (output.datatype() != kFp32) {
    return absl::InvalidArgumentError(
        absl::StrCat("output '", output.name(), "': datatype '", output.datatype(), "', not FP32"));
  }
  if (index >= response.raw_output_contents_size()) {
    const auto& values = output.contents().fp32_contents();
    return std::vector<float>(values.begin(), values.end());
  }
  const std::string& bytes = response.raw_output_contents(index);
  if (bytes.size() % sizeof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("output '", output.name(), "': ", bytes.size(),
                                                   " raw bytes, not a multiple of 4"));
  }
  std::vector<float> values(bytes.size() / sizeof(float));
  for (size_t i = 0; i < values.size(); ++i) {
    const uint32_t bits = LoadLittleEndian32(bytes.data() + i * sizeof(float));
    std::memcpy(&values[i], &bits, sizeof(bits));
  }
  return values;
}

}  // namespace dflash::kserve
