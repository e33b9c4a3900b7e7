#include "client/cli_requests.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dflash::client {
namespace {

namespace v1 = dflash::v1;
namespace pb = google::protobuf;

// A JSON string field: nullopt when absent or null; an error for any other type.
absl::StatusOr<std::optional<std::string>> StringField(const pb::Struct& object,
                                                       absl::string_view key,
                                                       absl::string_view where) {
  const auto it = object.fields().find(std::string(key));
  if (it == object.fields().end() || it->second.has_null_value()) return std::nullopt;
  if (!it->second.has_string_value()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": \"", key, "\" must be a string"));
  }
  return it->second.string_value();
}

absl::StatusOr<InputRecord> RecordFromObject(const pb::Struct& object, JsonlSchema schema,
                                             absl::string_view where) {
  DFLASH_ASSIGN_OR_RETURN(std::optional<std::string> text, StringField(object, "text", where));
  InputRecord record;
  switch (schema) {
    case JsonlSchema::kTextAndPair: {
      if (!text.has_value())
        return absl::InvalidArgumentError(absl::StrCat(where, ": no \"text\""));
      record.text = *std::move(text);
      DFLASH_ASSIGN_OR_RETURN(record.text_pair, StringField(object, "text_pair", where));
      break;
    }
    case JsonlSchema::kText: {
      if (!text.has_value())
        return absl::InvalidArgumentError(absl::StrCat(where, ": no \"text\""));
      // Silently dropping a second text would score something other than what the file says.
      if (object.fields().contains("text_pair")) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": \"text_pair\" is not an input of this command (texts only)"));
      }
      record.text = *std::move(text);
      break;
    }
    case JsonlSchema::kDocument: {
      DFLASH_ASSIGN_OR_RETURN(std::optional<std::string> document,
                              StringField(object, "document", where));
      if (document.has_value() && text.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": both \"document\" and \"text\"; give one"));
      }
      if (!document.has_value() && !text.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": no \"document\" (or \"text\")"));
      }
      record.text = document.has_value() ? *std::move(document) : *std::move(text);
      break;
    }
  }
  return record;
}

// [begin, end) ranges of at most `batch` inputs (all of them when batch is 0).
absl::StatusOr<std::vector<std::pair<size_t, size_t>>> Chunks(size_t count, uint32_t batch) {
  if (count == 0) return absl::InvalidArgumentError("no inputs");
  const size_t step = batch == 0 ? count : batch;
  std::vector<std::pair<size_t, size_t>> chunks;
  for (size_t begin = 0; begin < count; begin += step) {
    chunks.emplace_back(begin, std::min(count, begin + step));
  }
  return chunks;
}

// The fields shared by the request messages (numbers 1-6), where the message has them.
template <typename Request>
void SetShared(const CliArgs& args, Request& request) {
  request.set_model(args.model);
  request.set_request_id(args.request_id);
  if (args.truncate.has_value()) request.set_truncate(*args.truncate);
  request.set_truncation_direction(args.truncation_direction);
}

void SetTextInput(const InputRecord& record, v1::TextInput& input) {
  input.set_text(record.text);
  if (record.text_pair.has_value()) input.set_text_pair(*record.text_pair);
}

}  // namespace

JsonlSchema SchemaOf(Command command) {
  switch (command) {
    case Command::kZeroShot:
    case Command::kEmbed:
    case Command::kTokens:
      return JsonlSchema::kText;
    case Command::kRerank:
      return JsonlSchema::kDocument;
    default:
      return JsonlSchema::kTextAndPair;
  }
}

absl::StatusOr<std::vector<InputRecord>> ParseJsonl(std::istream& in, absl::string_view source,
                                                    JsonlSchema schema) {
  std::vector<InputRecord> records;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    const absl::string_view content = absl::StripAsciiWhitespace(line);  // also a CRLF's \r
    if (content.empty()) continue;
    const std::string where = absl::StrCat(source, ":", number);
    // Protobuf's parser calls a top-level array "Root element must be a message"; say it plainly.
    if (content.front() != '{') {
      return absl::InvalidArgumentError(absl::StrCat(where, ": expected a JSON object"));
    }
    pb::Struct object;
    const auto parsed =
        pb::util::JsonStringToMessage(pb::StringPiece(content.data(), content.size()), &object);
    if (!parsed.ok()) {
      // The parser's message continues with an excerpt and a caret on further lines.
      const std::string message(parsed.message().data(), parsed.message().size());
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": bad JSON: ", message.substr(0, message.find('\n'))));
    }
    DFLASH_ASSIGN_OR_RETURN(InputRecord record, RecordFromObject(object, schema, where));
    records.push_back(std::move(record));
  }
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat(source, ": read error"));
  if (records.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no inputs"));
  return records;
}

absl::StatusOr<std::vector<InputRecord>> CollectInputs(const CliArgs& args,
                                                       std::istream& stdin_stream) {
  if (!args.command.has_value()) return absl::InvalidArgumentError("missing command");
  const Command command = *args.command;
  if (command == Command::kInfo || command == Command::kHealth) {
    return std::vector<InputRecord>{};
  }
  if (!args.input.empty()) {
    const JsonlSchema schema = SchemaOf(command);
    if (args.input == "-") return ParseJsonl(stdin_stream, "<stdin>", schema);
    std::ifstream file(args.input);
    if (!file) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input=", args.input, ": cannot open: ", std::strerror(errno)));
    }
    return ParseJsonl(file, args.input, schema);
  }
  std::vector<InputRecord> records;
  if (command == Command::kRerank) {
    for (const std::string& document : args.documents) records.push_back({document, std::nullopt});
  } else {
    if (!args.text_pairs.empty() && args.text_pairs.size() != args.texts.size()) {
      return absl::InvalidArgumentError("give one --text_pair per --text");
    }
    for (size_t i = 0; i < args.texts.size(); ++i) {
      InputRecord record{args.texts[i], std::nullopt};
      if (!args.text_pairs.empty()) record.text_pair = args.text_pairs[i];
      records.push_back(std::move(record));
    }
  }
  if (records.empty()) {
    return absl::InvalidArgumentError(command == Command::kRerank ? "no --document or --input"
                                                                  : "no --text or --input");
  }
  return records;
}

absl::StatusOr<std::vector<v1::ClassifyRequest>> BuildClassifyRequests(
    const CliArgs& args, const std::vector<InputRecord>& inputs) {
  DFLASH_ASSIGN_OR_RETURN(const auto chunks, Chunks(inputs.size(), args.batch));
  std::vector<v1::ClassifyRequest> requests(chunks.size());
  for (size_t c = 0; c < chunks.size(); ++c) {
    v1::ClassifyRequest& request = requests[c];
    SetShared(args, request);
    request.set_priority(args.priority);
    request.set_truncation_strategy(args.truncation_strategy);
    for (size_t i = chunks[c].first; i < chunks[c].second; ++i) {
      SetTextInput(inputs[i], *request.add_inputs());
    }
    request.set_score_function(args.score_function);
    request.set_top_k(args.top_k);
  }
  return requests;
}

absl::StatusOr<std::vector<v1::ZeroShotRequest>> BuildZeroShotRequests(
    const CliArgs& args, const std::vector<InputRecord>& inputs) {
  if (args.labels.empty()) return absl::InvalidArgumentError("zeroshot needs --labels");
  DFLASH_ASSIGN_OR_RETURN(const auto chunks, Chunks(inputs.size(), args.batch));
  std::vector<v1::ZeroShotRequest> requests(chunks.size());
  for (size_t c = 0; c < chunks.size(); ++c) {
    v1::ZeroShotRequest& request = requests[c];
    SetShared(args, request);
    request.set_priority(args.priority);
    request.set_truncation_strategy(args.truncation_strategy);
    for (size_t i = chunks[c].first; i < chunks[c].second; ++i) {
      if (inputs[i].text_pair.has_value()) {
        return absl::InvalidArgumentError("zeroshot inputs are single texts");
      }
      request.add_texts(inputs[i].text);
    }
    for (const std::string& label : args.labels) request.add_candidate_labels(label);
    request.set_hypothesis_template(args.hypothesis_template);
    request.set_multi_label(args.multi_label);
    request.set_top_k(args.top_k);
  }
  return requests;
}

absl::StatusOr<std::vector<v1::RerankRequest>> BuildRerankRequests(
    const CliArgs& args, const std::vector<InputRecord>& inputs) {
  DFLASH_ASSIGN_OR_RETURN(const auto chunks, Chunks(inputs.size(), args.batch));
  std::vector<v1::RerankRequest> requests(chunks.size());
  for (size_t c = 0; c < chunks.size(); ++c) {
    v1::RerankRequest& request = requests[c];
    SetShared(args, request);
    request.set_priority(args.priority);
    request.set_truncation_strategy(args.truncation_strategy);
    request.set_query(args.query);
    for (size_t i = chunks[c].first; i < chunks[c].second; ++i) {
      request.add_documents(inputs[i].text);
    }
    request.set_top_n(args.top_n);
    request.set_return_documents(args.return_documents);
    request.set_score_function(args.score_function);
  }
  return requests;
}

absl::StatusOr<std::vector<v1::EmbedRequest>> BuildEmbedRequests(
    const CliArgs& args, const std::vector<InputRecord>& inputs) {
  DFLASH_ASSIGN_OR_RETURN(const auto chunks, Chunks(inputs.size(), args.batch));
  std::vector<v1::EmbedRequest> requests(chunks.size());
  for (size_t c = 0; c < chunks.size(); ++c) {
    v1::EmbedRequest& request = requests[c];
    SetShared(args, request);
    request.set_priority(args.priority);
    for (size_t i = chunks[c].first; i < chunks[c].second; ++i) {
      if (inputs[i].text_pair.has_value()) {
        return absl::InvalidArgumentError("embed inputs are single texts");
      }
      request.add_inputs(inputs[i].text);
    }
    if (args.normalize.has_value()) request.set_normalize(*args.normalize);
    request.set_dimensions(args.dimensions);
    request.set_encoding(args.encoding);
  }
  return requests;
}

absl::StatusOr<std::vector<v1::TokenizeRequest>> BuildTokenizeRequests(
    const CliArgs& args, const std::vector<InputRecord>& inputs) {
  DFLASH_ASSIGN_OR_RETURN(const auto chunks, Chunks(inputs.size(), args.batch));
  std::vector<v1::TokenizeRequest> requests(chunks.size());
  for (size_t c = 0; c < chunks.size(); ++c) {
    v1::TokenizeRequest& request = requests[c];
    SetShared(args, request);  // Tokenize does not queue: no priority
    request.set_truncation_strategy(args.truncation_strategy);
    for (size_t i = chunks[c].first; i < chunks[c].second; ++i) {
      SetTextInput(inputs[i], *request.add_inputs());
    }
    if (args.add_special_tokens.has_value()) {
      request.set_add_special_tokens(*args.add_special_tokens);
    }
  }
  return requests;
}

absl::StatusOr<std::vector<v1::TokenClassifyRequest>> BuildTokenClassifyRequests(
    const CliArgs& args, const std::vector<InputRecord>& inputs) {
  DFLASH_ASSIGN_OR_RETURN(const auto chunks, Chunks(inputs.size(), args.batch));
  std::vector<v1::TokenClassifyRequest> requests(chunks.size());
  for (size_t c = 0; c < chunks.size(); ++c) {
    v1::TokenClassifyRequest& request = requests[c];
    SetShared(args, request);
    request.set_priority(args.priority);
    for (size_t i = chunks[c].first; i < chunks[c].second; ++i) {
      if (inputs[i].text_pair.has_value()) {
        return absl::InvalidArgumentError("tokens inputs are single texts");
      }
      request.add_inputs(inputs[i].text);
    }
    request.set_aggregation(args.aggregation);
    for (const std::string& label : args.ignore_labels) request.add_ignore_labels(label);
    request.set_keep_all_labels(args.keep_all_labels);
  }
  return requests;
}

v1::InfoRequest BuildInfoRequest(const CliArgs& args) {
  v1::InfoRequest request;
  request.set_model(args.model);
  return request;
}

grpc::health::v1::HealthCheckRequest BuildHealthRequest(const CliArgs& args) {
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(args.service);
  return request;
}

}  // namespace dflash::client
