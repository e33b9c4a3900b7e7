#include "loadtest/kserve_request.h"

#include <cstdint>
#include <string>

namespace dflash::loadtest {
namespace {

// The raw BYTES tensor encoding: each element's 4-byte little-endian length, then its bytes.
void AppendRawElement(const std::string& element, std::string& raw) {
  const auto length = static_cast<uint32_t>(element.size());
  for (int i = 0; i < 4; ++i) raw.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  raw.append(element);
}

void AddInput(const char* name, int64_t elements, std::string raw,
              inference::ModelInferRequest& request) {
  auto* input = request.add_inputs();
  input->set_name(name);
  input->set_datatype("BYTES");
  input->add_shape(elements);
  request.add_raw_input_contents(std::move(raw));
}

}  // namespace

inference::ModelInferRequest ToModelInferRequest(const dflash::v1::ClassifyRequest& request) {
  inference::ModelInferRequest infer;
  infer.set_model_name(request.model());
  infer.set_id(request.request_id());
  if (request.has_truncate())
    (*infer.mutable_parameters())["truncate"].set_bool_param(request.truncate());
  std::string texts;
  std::string pairs;
  bool any_pair = false;
  for (const auto& input : request.inputs()) {
    AppendRawElement(input.text(), texts);
    AppendRawElement(input.text_pair(), pairs);
    any_pair = any_pair || input.has_text_pair();
  }
  AddInput("text", request.inputs_size(), std::move(texts), infer);
  if (any_pair) AddInput("text_pair", request.inputs_size(), std::move(pairs), infer);
  infer.add_outputs()->set_name("scores");
  return infer;
}

dflash::v1::ResponseMetadata MetadataOfInfer(const inference::ModelInferResponse& response) {
  dflash::v1::ResponseMetadata metadata;
  metadata.set_request_id(response.id());
  metadata.set_model(response.model_name());
  auto read = [&response](const char* key) -> uint64_t {
    const auto found = response.parameters().find(key);
    if (found == response.parameters().end()) return 0;
    const int64_t value = found->second.int64_param();
    return value > 0 ? static_cast<uint64_t>(value) : 0;
  };
  metadata.set_tokens(read("tokens"));
  metadata.set_tokenization_us(read("tokenization_us"));
  metadata.set_queue_us(read("queue_us"));
  metadata.set_inference_us(read("inference_us"));
  metadata.set_total_us(read("total_us"));
  return metadata;
}

}  // namespace dflash::loadtest
