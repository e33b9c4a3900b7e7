#include "loadtest/http_request.h"

#include <nlohmann/json.hpp>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dflash::loadtest {
namespace {

namespace v1 = ::dflash::v1;
using json = nlohmann::json;

// An answer head larger than this is not one this server sends.
constexpr size_t kMaxHeadBytes = 64 << 10;

template <typename Request>
void AddCommon(const Request& request, json& body) {
  if (!request.model().empty()) body["model"] = request.model();
  if (request.has_truncate()) body["truncate"] = request.truncate();
}

json StringArray(const google::protobuf::RepeatedPtrField<std::string>& strings) {
  json array = json::array();
  for (const std::string& text : strings) array.push_back(text);
  return array;
}

}  // namespace

absl::StatusOr<std::string> HttpPathFor(RpcKind rpc) {
  switch (rpc) {
    case RpcKind::kClassify:
      return std::string("/predict");
    case RpcKind::kEmbed:
      return std::string("/embed");
    case RpcKind::kRerank:
      return std::string("/rerank");
    case RpcKind::kZeroShot:
    case RpcKind::kTokenize:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--protocol=http sends classify, embed and rerank workloads only, not ", RpcKindName(rpc)));
}

absl::StatusOr<HttpCall> ToHttpCall(const RpcRequest& request) {
  HttpCall call;
  json body = json::object();
  if (const auto* classify = std::get_if<v1::ClassifyRequest>(&request)) {
    call.path = "/predict";
    AddCommon(*classify, body);
    bool any_pair = false;
    for (const auto& input : classify->inputs()) any_pair = any_pair || input.has_text_pair();
    json inputs = json::array();
    for (const auto& input : classify->inputs()) {
      if (any_pair) {
        inputs.push_back(input.has_text_pair() ? json::array({input.text(), input.text_pair()})
                                               : json::array({input.text()}));
      } else {
        inputs.push_back(input.text());
      }
    }
    // A batch of one or two plain strings would read as one text or one pair: send [[text]].
    if (!any_pair && inputs.size() <= 2) {
      for (json& input : inputs) input = json::array({input});
    }
    body["inputs"] = std::move(inputs);
  } else if (const auto* embed = std::get_if<v1::EmbedRequest>(&request)) {
    call.path = "/embed";
    AddCommon(*embed, body);
    body["inputs"] = StringArray(embed->inputs());
    if (embed->has_normalize()) body["normalize"] = embed->normalize();
  } else if (const auto* rerank = std::get_if<v1::RerankRequest>(&request)) {
    call.path = "/rerank";
    AddCommon(*rerank, body);
    body["query"] = rerank->query();
    body["texts"] = StringArray(rerank->documents());
  } else {
    return absl::InvalidArgumentError("--protocol=http sends classify, embed and rerank only");
  }
  call.body = body.dump();
  return call;
}

std::string SerializeHttpRequest(const HttpCall& call, absl::string_view host,
                                 absl::string_view api_key) {
  std::string bytes = absl::StrCat(
      "POST ", call.path, " HTTP/1.1\r\nHost: ", host,
      "\r\nContent-Type: application/json\r\nContent-Length: ", call.body.size(), "\r\n");
  if (!api_key.empty()) absl::StrAppend(&bytes, "Authorization: Bearer ", api_key, "\r\n");
  absl::StrAppend(&bytes, "\r\n", call.body);
  return bytes;
}

absl::Status HttpResponseReader::ParseHead() {
  std::vector<absl::string_view> lines = absl::StrSplit(head_, "\r\n");
  // "HTTP/1.1 200 OK"
  const std::vector<absl::string_view> status_line =
      absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  if (status_line.size() < 2 || !absl::StartsWith(status_line[0], "HTTP/1.") ||
      status_line[1].size() != 3 || !absl::SimpleAtoi(status_line[1], &status_) || status_ < 100) {
    return absl::InternalError(absl::StrCat("malformed HTTP status line \"", lines[0], "\""));
  }
  if (status_line[0] == "HTTP/1.0") keep_alive_ = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) {
      return absl::InternalError(absl::StrCat("malformed HTTP header \"", lines[i], "\""));
    }
    const std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(lines[i].substr(colon + 1));
    if (name == "content-length") {
      if (!absl::SimpleAtoi(value, &content_length_) || content_length_ < 0) {
        return absl::InternalError(absl::StrCat("bad Content-Length \"", value, "\""));
      }
    } else if (name == "transfer-encoding" && !absl::EqualsIgnoreCase(value, "identity")) {
      return absl::InternalError(absl::StrCat("unsupported Transfer-Encoding \"", value, "\""));
    } else if (name == "connection") {
      if (absl::EqualsIgnoreCase(value, "close")) keep_alive_ = false;
      if (absl::EqualsIgnoreCase(value, "keep-alive")) keep_alive_ = true;
    }
  }
  // 1xx, 204 and 304 answers have no body.
  if (status_ < 200 || status_ == 204 || status_ == 304) content_length_ = 0;
  if (content_length_ < 0) keep_alive_ = false;
  return absl::OkStatus();
}

absl::StatusOr<bool> HttpResponseReader::Feed(absl::string_view bytes) {
  if (complete_) {
    if (!bytes.empty()) return absl::InternalError("bytes after the end of the HTTP answer");
    return true;
  }
  if (!head_done_) {
    const size_t old_size = head_.size();
    head_.append(bytes.data(), bytes.size());
    // The blank line may straddle the previous piece.
    const size_t end = head_.find("\r\n\r\n", old_size < 3 ? 0 : old_size - 3);
    if (end == std::string::npos) {
      if (head_.size() > kMaxHeadBytes) return absl::InternalError("HTTP answer head too large");
      return false;
    }
    bytes = absl::string_view(head_).substr(end + 4);
    body_.assign(bytes.data(), bytes.size());
    head_.resize(end);
    head_done_ = true;
    if (absl::Status parsed = ParseHead(); !parsed.ok()) return parsed;
    if (status_ < 200) {  // An interim answer (100 Continue): the real one follows.
      const std::string rest = std::move(body_);
      *this = HttpResponseReader();
      return Feed(rest);
    }
  } else {
    body_.append(bytes.data(), bytes.size());
  }
  if (content_length_ < 0) return false;
  if (static_cast<int64_t>(body_.size()) > content_length_) {
    return absl::InternalError("bytes after the end of the HTTP answer");
  }
  complete_ = static_cast<int64_t>(body_.size()) == content_length_;
  return complete_;
}

absl::Status HttpResponseReader::FinishAtClose() {
  if (complete_) return absl::OkStatus();
  if (head_done_ && content_length_ < 0) {
    complete_ = true;
    return absl::OkStatus();
  }
  return absl::UnavailableError(empty() ? "the server closed the connection"
                                        : "the server closed the connection mid-answer");
}

}  // namespace dflash::loadtest
