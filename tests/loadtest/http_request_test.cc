// --protocol=http's request building (the TEI JSON bodies, the request bytes) and the answer
// reader: split reads, Content-Length and close-delimited bodies, keep-alive, malformed answers.
#include "loadtest/http_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace dflash::loadtest {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
namespace v1 = ::dflash::v1;

json Body(const RpcRequest& request, const std::string& path) {
  absl::StatusOr<HttpCall> call = ToHttpCall(request);
  EXPECT_TRUE(call.ok()) << call.status();
  if (!call.ok()) return json();
  EXPECT_EQ(call->path, path);
  return json::parse(call->body);
}

TEST(HttpRequestTest, RoutesOfEachRpc) {
  EXPECT_EQ(*HttpPathFor(RpcKind::kClassify), "/predict");
  EXPECT_EQ(*HttpPathFor(RpcKind::kEmbed), "/embed");
  EXPECT_EQ(*HttpPathFor(RpcKind::kRerank), "/rerank");
  const absl::StatusOr<std::string> zeroshot = HttpPathFor(RpcKind::kZeroShot);
  EXPECT_EQ(zeroshot.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zeroshot.status().message(), HasSubstr("zeroshot"));
  EXPECT_FALSE(HttpPathFor(RpcKind::kTokenize).ok());
  EXPECT_FALSE(ToHttpCall(v1::TokenizeRequest()).ok());
}

TEST(HttpRequestTest, ClassifyPairsAreTwoElementArrays) {
  v1::ClassifyRequest request;
  request.set_model("demo");
  request.set_truncate(false);
  auto* first = request.add_inputs();
  first->set_text("a premise");
  first->set_text_pair("a \"hypothesis\"");
  request.add_inputs()->set_text("alone");
  EXPECT_EQ(Body(request, "/predict"), json::parse(R"({"model": "demo", "truncate": false,
                            "inputs": [["a premise", "a \"hypothesis\""], ["alone"]]})"));
}

TEST(HttpRequestTest, ClassifySingleTextsCannotReadAsAPair) {
  v1::ClassifyRequest one;
  one.add_inputs()->set_text("one text");
  EXPECT_EQ(Body(one, "/predict"), json::parse(R"({"inputs": [["one text"]]})"));
  v1::ClassifyRequest two;
  two.add_inputs()->set_text("first");
  two.add_inputs()->set_text("second");
  EXPECT_EQ(Body(two, "/predict"), json::parse(R"({"inputs": [["first"], ["second"]]})"));
  v1::ClassifyRequest three;
  for (const char* text : {"a", "b", "c"}) three.add_inputs()->set_text(text);
  EXPECT_EQ(Body(three, "/predict"), json::parse(R"({"inputs": ["a", "b", "c"]})"));
}

TEST(HttpRequestTest, EmbedAndRerankBodies) {
  v1::EmbedRequest embed;
  embed.add_inputs("x");
  embed.add_inputs("y");
  EXPECT_EQ(Body(embed, "/embed"), json::parse(R"({"inputs": ["x", "y"]})"));
  v1::RerankRequest rerank;
  rerank.set_model("rr");
  rerank.set_query("q");
  rerank.add_documents("d1");
  rerank.add_documents("d2");
  EXPECT_EQ(Body(rerank, "/rerank"),
            json::parse(R"({"model": "rr", "query": "q", "texts": ["d1", "d2"]})"));
}

TEST(HttpRequestTest, SerializedRequest) {
  const HttpCall call{"/predict", R"({"inputs": "é"})"};
  EXPECT_EQ(SerializeHttpRequest(call, "127.0.0.1:8080", ""),
            "POST /predict HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\n"
            "Content-Length: 16\r\n\r\n{\"inputs\": \"é\"}");
  EXPECT_THAT(SerializeHttpRequest(call, "h:1", "k3y"),
              HasSubstr("\r\nAuthorization: Bearer k3y\r\n\r\n{"));
}

TEST(HttpResponseReaderTest, ContentLengthAnswerFedByteByByte) {
  const std::string answer =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 7\r\n\r\n[[0.5]]";
  HttpResponseReader reader;
  EXPECT_TRUE(reader.empty());
  for (size_t i = 0; i + 1 < answer.size(); ++i) {
    absl::StatusOr<bool> done = reader.Feed(answer.substr(i, 1));
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_FALSE(*done) << "complete after " << i + 1 << " bytes";
  }
  absl::StatusOr<bool> done = reader.Feed(answer.substr(answer.size() - 1));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(*done);
  EXPECT_EQ(reader.status(), 200);
  EXPECT_EQ(reader.body(), "[[0.5]]");
  EXPECT_TRUE(reader.keep_alive());
}

TEST(HttpResponseReaderTest, ErrorStatusAndConnectionClose) {
  HttpResponseReader reader;
  absl::StatusOr<bool> done = reader.Feed(
      "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(*done);
  EXPECT_EQ(reader.status(), 503);
  EXPECT_FALSE(reader.keep_alive());
}

TEST(HttpResponseReaderTest, BodyDelimitedByTheClose) {
  HttpResponseReader reader;
  ASSERT_FALSE(*reader.Feed("HTTP/1.1 200 OK\r\n\r\nabc"));
  ASSERT_FALSE(*reader.Feed("def"));
  EXPECT_TRUE(reader.FinishAtClose().ok());
  EXPECT_EQ(reader.body(), "abcdef");
  EXPECT_FALSE(reader.keep_alive());
}

TEST(HttpResponseReaderTest, InterimAnswerIsSkipped) {
  HttpResponseReader reader;
  absl::StatusOr<bool> done =
      reader.Feed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(*done);
  EXPECT_EQ(reader.status(), 204);
}

TEST(HttpResponseReaderTest, Failures) {
  EXPECT_FALSE(HttpResponseReader().Feed("SMTP ready\r\n\r\n").ok());
  EXPECT_FALSE(HttpResponseReader().Feed("HTTP/1.1 2000 OK\r\n\r\n").ok());
  EXPECT_FALSE(HttpResponseReader().Feed("HTTP/1.1 200 OK\r\nno colon\r\n\r\n").ok());
  EXPECT_FALSE(HttpResponseReader().Feed("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n").ok());
  EXPECT_FALSE(
      HttpResponseReader().Feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").ok());
  EXPECT_FALSE(HttpResponseReader().Feed("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab").ok());
  HttpResponseReader cut;
  ASSERT_FALSE(*cut.Feed("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab"));
  const absl::Status closed = cut.FinishAtClose();
  EXPECT_EQ(closed.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(closed.message(), HasSubstr("mid-answer"));
  EXPECT_EQ(HttpResponseReader().FinishAtClose().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace dflash::loadtest
