// dflash-loadtest's HTTP/JSON protocol (--protocol=http): a generated request as the TEI route's
// JSON body (classify -> POST /predict, embed -> POST /embed, rerank -> POST /rerank), the
// HTTP/1.1 bytes that carry it, and an incremental reader of the answer.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/rpc_caller.h"
#include "loadtest/workload.h"

namespace dflash::loadtest {

// The route a workload's RPC is sent to; INVALID_ARGUMENT for RPCs the HTTP front has no TEI
// route for in this tool (zeroshot, tokenize).
absl::StatusOr<std::string> HttpPathFor(RpcKind rpc);

struct HttpCall {
  std::string path;
  std::string body;  // JSON.
};

// The TEI request of `request`: /predict {"inputs": [[text, pair], ...]} or [text, ...],
// /embed {"inputs": [...]}, /rerank {"query", "texts"}; "model" and "truncate" when the request
// sets them.
absl::StatusOr<HttpCall> ToHttpCall(const RpcRequest& request);

// The request's bytes: POST with Host, Content-Type, Content-Length and, when `api_key` is not
// empty, "Authorization: Bearer <api_key>". Keep-alive is HTTP/1.1's default.
std::string SerializeHttpRequest(const HttpCall& call, absl::string_view host,
                                 absl::string_view api_key);

// Reads one answer fed in pieces as they arrive. Answers carry a Content-Length or end with the
// connection (chunked bodies are refused: the server always knows its answer's length).
class HttpResponseReader {
 public:
  // Consumes `bytes`; true once the answer is complete (bytes after it are an error: the client
  // sends one request at a time). Malformed answers are INTERNAL.
  absl::StatusOr<bool> Feed(absl::string_view bytes);
  // The peer closed the connection: completes an answer delimited by the close, else an error.
  absl::Status FinishAtClose();

  int status() const { return status_; }
  const std::string& body() const { return body_; }
  // False when the answer says "Connection: close" or ends with the connection.
  bool keep_alive() const { return keep_alive_; }
  // Nothing of an answer has arrived yet.
  bool empty() const { return head_.empty() && !head_done_; }

 private:
  absl::Status ParseHead();

  std::string head_;
  bool head_done_ = false;
  int status_ = 0;
  int64_t content_length_ = -1;  // -1: delimited by the close.
  bool keep_alive_ = true;
  bool complete_ = false;
  std::string body_;
};

}  // namespace dflash::loadtest
