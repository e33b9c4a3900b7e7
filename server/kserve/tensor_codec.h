// The tensor encodings of the KServe v2 inference protocol, for the datatypes DisentangledFlash
// models read and write: BYTES inputs (one UTF-8 text per element) and FP32 outputs. A tensor's
// elements travel either in its typed `contents` or, in the request's raw_input_contents /
// the response's raw_output_contents, as bytes: FP32 as little-endian floats, BYTES as each
// element's 4-byte little-endian length followed by its bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "inference/grpc_service.pb.h"

namespace dflash::kserve {

// The number of elements of a tensor of `shape`; INVALID_ARGUMENT naming `tensor` for a negative
// dimension or a product that does not fit in int64.
absl::StatusOr<int64_t> ShapeElements(std::span<const int64_t> shape, absl::string_view tensor);

// INVALID_ARGUMENT unless the request's inputs are either all raw (one raw_input_contents entry
// per input, no typed contents) or all typed.
absl::Status CheckInputLayout(const inference::ModelInferRequest& request);

// The elements of the request's BYTES input `index` (its datatype and element count checked
// against its shape), viewing the request's own bytes. INVALID_ARGUMENT naming the input for
// another datatype, a count that does not match the shape, or malformed raw data. The request
// must have passed CheckInputLayout.
absl::StatusOr<std::vector<absl::string_view>> DecodeBytesInput(
    const inference::ModelInferRequest& request, int index);

// Raw BYTES encoding of `elements` (how clients send BYTES inputs raw).
std::string EncodeRawBytes(std::span<const std::string> elements);

// Adds an FP32 output tensor of `shape` holding `values` (row-major) to `response`: raw (in
// raw_output_contents) or typed (contents.fp32_contents). Every output of a response must use the
// same encoding.
void AddFp32Output(absl::string_view name, std::span<const int64_t> shape,
                   std::span<const float> values, bool raw,
                   inference::ModelInferResponse& response);

// The values of `response`'s FP32 output `index`, raw or typed; INVALID_ARGUMENT when it is not
// FP32 or its data is malformed (for clients and tests of this server).
absl::StatusOr<std::vector<float>> DecodeFp32Output(const inference::ModelInferResponse& response,
                                                    int index);

}  // namespace dflash::kserve
