// End-to-end security and discovery: API keys (UNAUTHENTICATED), TLS and mutual TLS with the
// committed test certificates (tests/e2e/certs/make_certs.sh), the grpc.health.v1 service (never
// behind API keys) and server reflection.
#include <gmock/gmock.h>
#include <google/protobuf/descriptor.pb.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/e2e/e2e_harness.h"
#include "tests/e2e/http_client.h"

namespace dflash::e2e {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using HealthStatus = grpc::health::v1::HealthCheckResponse;

constexpr char kKey[] = "e2e-test-key-0123456789abcdef";
constexpr char kSecondKey[] = "another-e2e-key-9876543210";

std::string ReadCert(const std::string& name) {
  std::ifstream in(CertsDir() / name, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_FALSE(text.str().empty()) << "cannot read " << (CertsDir() / name).string();
  return text.str();
}

// A server of the demo model on the null engine (no compute: these tests are about the door).
absl::StatusOr<std::unique_ptr<TestServer>> StartServer(const ServerConfig& config) {
  return TestServer::Start(config, GatedLoader({}, InnerEngine::kNull));
}

ServerConfig DemoConfig() { return TestServerConfig({TestModelEntry("demo", DemoModelDir())}); }

// Info over `channel`, with the metadata entry `header: value` unless `value` is empty.
grpc::Status CallInfo(const std::shared_ptr<grpc::Channel>& channel, const std::string& header = "",
                      const std::string& value = "", absl::Duration timeout = absl::Seconds(20)) {
  auto stub = v1::InferenceService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  if (!value.empty()) context.AddMetadata(header, value);
  v1::InfoResponse response;
  grpc::Status status = stub->Info(&context, v1::InfoRequest(), &response);
  if (status.ok() && response.models_size() != 1) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "test: unexpected Info answer");
  }
  return status;
}

// ---------------------------------------------------------------------------------------------
// API keys.
// ---------------------------------------------------------------------------------------------

TEST(ApiKeyTest, KeysAreRequiredExceptForHealth) {
  ServerConfig config = DemoConfig();
  config.auth.api_keys = {kKey, kSecondKey};
  absl::StatusOr<std::unique_ptr<TestServer>> started = StartServer(config);
  ASSERT_TRUE(started.ok()) << started.status();
  TestServer& server = **started;
  const auto& channel = server.channel();

  grpc::Status missing = CallInfo(channel);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(missing.error_message(), HasSubstr("missing API key"));
  grpc::Status wrong = CallInfo(channel, "authorization", "Bearer not-the-key-0123456789");
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(wrong.error_message(), HasSubstr("invalid API key"));
  EXPECT_EQ(CallInfo(channel, "authorization", absl::StrCat(kKey, "x")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CallInfo(channel, "authorization", "Bearer ").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CallInfo(channel, "x-other-header", kKey).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  EXPECT_TRUE(CallInfo(channel, "authorization", absl::StrCat("Bearer ", kKey)).ok());
  EXPECT_TRUE(CallInfo(channel, "authorization", kKey).ok()) << "bare key";
  EXPECT_TRUE(CallInfo(channel, "authorization", absl::StrCat("bearer ", kSecondKey)).ok());

  // Every RPC is behind the key: a unary inference call and a stream.
  v1::ClassifyRequest classify;
  classify.add_inputs()->set_text("hello");
  v1::ClassifyResponse response;
  EXPECT_EQ(server.stub().Classify(NewContext().get(), classify, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto keyed = NewContext();
  keyed->AddMetadata("authorization", absl::StrCat("Bearer ", kKey));
  EXPECT_TRUE(server.stub().Classify(keyed.get(), classify, &response).ok());
  {
    auto context = NewContext();
    auto stream = server.stub().ClassifyStream(context.get());
    stream->Write(classify);
    stream->WritesDone();
    v1::ClassifyStreamResponse message;
    EXPECT_FALSE(stream->Read(&message));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    auto context = NewContext();
    context->AddMetadata("authorization", kKey);
    auto stream = server.stub().ClassifyStream(context.get());
    ASSERT_TRUE(stream->Write(classify));
    stream->WritesDone();
    v1::ClassifyStreamResponse message;
    ASSERT_TRUE(stream->Read(&message));
    EXPECT_TRUE(message.has_response());
    EXPECT_TRUE(stream->Finish().ok());
  }

  // Health (Kubernetes probes carry no key) and reflection are not behind the key.
  EXPECT_EQ(CheckHealth(server.health(), "").serving, HealthStatus::SERVING);
  EXPECT_EQ(CheckHealth(server.health(), serving::kInferenceServiceName).serving,
            HealthStatus::SERVING);
  absl::StatusOr<std::vector<std::string>> services = ReflectionListServices(channel);
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_THAT(*services, Contains(std::string(serving::kInferenceServiceName)));

  // Calls refused at the door are counted like any other, under the model label "".
  auto refused = [&server](absl::string_view rpc) {
    return ScrapeRegistry(server.runtime(), "dflash_requests_total",
                          {{"rpc", std::string(rpc)}, {"model", ""}, {"code", "UNAUTHENTICATED"}});
  };
  EXPECT_EQ(refused("Info"), 5);
  EXPECT_EQ(refused("Classify"), 1);
  EXPECT_EQ(refused("ClassifyStream"), 1);
}

TEST(ApiKeyTest, KeysFileAndCustomHeader) {
  test::ScopedTempDir directory;
  const std::filesystem::path keys = directory.path() / "api_keys.txt";
  ASSERT_TRUE(
      test::WriteTextFile(keys, absl::StrCat("# e2e keys\n\n", kKey, "\n", kSecondKey, "\n")).ok());
  ServerConfig config = DemoConfig();
  config.auth.api_keys_file = keys.string();
  config.auth.header = "x-api-key";
  absl::StatusOr<std::unique_ptr<TestServer>> started = StartServer(config);
  ASSERT_TRUE(started.ok()) << started.status();
  const auto& channel = (*started)->channel();
  EXPECT_TRUE(CallInfo(channel, "x-api-key", kSecondKey).ok());
  EXPECT_TRUE(CallInfo(channel, "x-api-key", absl::StrCat("Bearer ", kKey)).ok());
  const grpc::Status elsewhere = CallInfo(channel, "authorization", absl::StrCat("Bearer ", kKey));
  EXPECT_EQ(elsewhere.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(elsewhere.error_message(), HasSubstr("x-api-key"));
}

// ---------------------------------------------------------------------------------------------
// TLS and mutual TLS.
// ---------------------------------------------------------------------------------------------

std::shared_ptr<grpc::Channel> TlsChannel(const std::string& address, const std::string& root,
                                          const std::string& cert = "", const std::string& key = "",
                                          const std::string& target_name = "") {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = root;
  options.pem_cert_chain = cert;
  options.pem_private_key = key;
  grpc::ChannelArguments arguments;
  if (!target_name.empty()) arguments.SetSslTargetNameOverride(target_name);
  // A fresh connection per channel: a handshake that failed on one must not be reused.
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(options), arguments);
}

std::shared_ptr<grpc::Channel> PlaintextChannel(const std::string& address) {
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), arguments);
}

TEST(TlsTest, TlsClientsConnectAndPlaintextClientsDoNot) {
  ServerConfig config = DemoConfig();
  config.tls.cert_file = (CertsDir() / "server.pem").string();
  config.tls.key_file = (CertsDir() / "server.key").string();
  absl::StatusOr<std::unique_ptr<TestServer>> started = StartServer(config);
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string address = (*started)->address();
  const std::string ca = ReadCert("ca.pem");

  // The certificate names 127.0.0.1 (IP SAN) and localhost (DNS SAN).
  EXPECT_TRUE(CallInfo(TlsChannel(address, ca)).ok());
  EXPECT_TRUE(CallInfo(TlsChannel(address, ca, "", "", "localhost")).ok());
  auto health = grpc::health::v1::Health::NewStub(TlsChannel(address, ca));
  EXPECT_EQ(CheckHealth(*health, "").serving, HealthStatus::SERVING);
  // A client presenting a certificate to a server that asks for none is fine too.
  EXPECT_TRUE(
      CallInfo(TlsChannel(address, ca, ReadCert("client.pem"), ReadCert("client.key"))).ok());

  EXPECT_FALSE(CallInfo(PlaintextChannel(address)).ok()) << "plaintext client";
  EXPECT_FALSE(CallInfo(TlsChannel(address, ReadCert("other_ca.pem"))).ok())
      << "a client that does not trust the server's CA";
  EXPECT_FALSE(CallInfo(TlsChannel(address, ca, "", "", "not-the-server.example")).ok())
      << "a name the certificate does not cover";
}

TEST(TlsTest, MutualTlsRequiresAClientCertificateOfTheClientCa) {
  ServerConfig config = DemoConfig();
  config.tls.cert_file = (CertsDir() / "server.pem").string();
  config.tls.key_file = (CertsDir() / "server.key").string();
  config.tls.client_ca_file = (CertsDir() / "ca.pem").string();
  absl::StatusOr<std::unique_ptr<TestServer>> started = StartServer(config);
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string address = (*started)->address();
  const std::string ca = ReadCert("ca.pem");

  EXPECT_TRUE(
      CallInfo(TlsChannel(address, ca, ReadCert("client.pem"), ReadCert("client.key"))).ok());
  EXPECT_FALSE(CallInfo(TlsChannel(address, ca)).ok()) << "no client certificate";
  EXPECT_FALSE(
      CallInfo(TlsChannel(address, ca, ReadCert("other_client.pem"), ReadCert("other_client.key")))
          .ok())
      << "a client certificate of another CA";
  EXPECT_FALSE(CallInfo(PlaintextChannel(address)).ok()) << "plaintext client";
}

// The HTTP routes on the same TLS settings: HTTPS with the server's certificate; under mutual TLS
// a request whose connection carries no client certificate of the client CA gets 403 (the TLS
// session asks for one without requiring it), and one of the client CA is served.
TEST(TlsTest, HttpRoutesServeTlsAndMutualTls) {
  const TlsClientFiles trust_only{(CertsDir() / "ca.pem").string(), "", ""};
  const TlsClientFiles client{(CertsDir() / "ca.pem").string(),
                              (CertsDir() / "client.pem").string(),
                              (CertsDir() / "client.key").string()};
  const TlsClientFiles other_client{(CertsDir() / "ca.pem").string(),
                                    (CertsDir() / "other_client.pem").string(),
                                    (CertsDir() / "other_client.key").string()};
  ServerConfig config = DemoConfig();
  config.http_listen = "127.0.0.1:0";
  config.tls.cert_file = (CertsDir() / "server.pem").string();
  config.tls.key_file = (CertsDir() / "server.key").string();
  {
    absl::StatusOr<std::unique_ptr<TestServer>> started = StartServer(config);
    ASSERT_TRUE(started.ok()) << started.status();
    const int port = (*started)->runtime().http_port();
    absl::StatusOr<HttpClient> https = HttpClient::ConnectTls(port, trust_only);
    ASSERT_TRUE(https.ok()) << https.status();
    absl::StatusOr<HttpAnswer> answer = https->Post("/predict", R"({"inputs": "tls works"})");
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->status, 200) << answer->body;
    absl::StatusOr<HttpClient> plaintext = HttpClient::Connect(port);
    ASSERT_TRUE(plaintext.ok()) << plaintext.status();
    absl::StatusOr<HttpAnswer> refused = plaintext->Get("/health");
    EXPECT_FALSE(refused.ok() && refused->status == 200) << "plaintext request answered";
  }
  config.tls.client_ca_file = (CertsDir() / "ca.pem").string();
  absl::StatusOr<std::unique_ptr<TestServer>> started = StartServer(config);
  ASSERT_TRUE(started.ok()) << started.status();
  const int port = (*started)->runtime().http_port();
  {
    absl::StatusOr<HttpClient> https = HttpClient::ConnectTls(port, client);
    ASSERT_TRUE(https.ok()) << https.status();
    absl::StatusOr<HttpAnswer> answer = https->Post("/predict", R"({"inputs": "mutual tls"})");
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->status, 200) << answer->body;
  }
  {
    absl::StatusOr<HttpClient> https = HttpClient::ConnectTls(port, trust_only);
    ASSERT_TRUE(https.ok()) << https.status();
    absl::StatusOr<HttpAnswer> answer = https->Post("/predict", R"({"inputs": "no certificate"})");
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->status, 403);
    EXPECT_THAT(answer->body, HasSubstr("requires a TLS client certificate"));
  }
  {
    // GnuTLS sends no certificate of a CA the server does not name; either way the request is
    // refused.
    absl::StatusOr<HttpClient> https = HttpClient::ConnectTls(port, other_client);
    ASSERT_TRUE(https.ok()) << https.status();
    absl::StatusOr<HttpAnswer> answer = https->Get("/health");
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->status, 403);
    EXPECT_THAT(answer->body, HasSubstr("TLS client certificate"));
    EXPECT_THAT(answer->body, HasSubstr("Unauthorized"));
  }
}

// ---------------------------------------------------------------------------------------------
// 10. Health and reflection.
// ---------------------------------------------------------------------------------------------

TEST(DiscoveryTest, HealthAndReflection) {
  absl::StatusOr<std::unique_ptr<TestServer>> started = StartServer(DemoConfig());
  ASSERT_TRUE(started.ok()) << started.status();
  TestServer& server = **started;

  EXPECT_EQ(CheckHealth(server.health(), "").serving, HealthStatus::SERVING);
  EXPECT_EQ(CheckHealth(server.health(), "dflash.v1.InferenceService").serving,
            HealthStatus::SERVING);
  EXPECT_EQ(CheckHealth(server.health(), "no.such.Service").status.error_code(),
            grpc::StatusCode::NOT_FOUND);

  absl::StatusOr<std::vector<std::string>> services = ReflectionListServices(server.channel());
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_THAT(*services, Contains(std::string("dflash.v1.InferenceService")));
  EXPECT_THAT(*services, Contains(std::string("grpc.reflection.v1alpha.ServerReflection")));

  // The descriptor reflection serves is the API's, with every RPC and its streaming shape.
  absl::StatusOr<std::string> file =
      ReflectionFileContainingSymbol(server.channel(), "dflash.v1.InferenceService");
  ASSERT_TRUE(file.ok()) << file.status();
  google::protobuf::FileDescriptorProto descriptor;
  ASSERT_TRUE(descriptor.ParseFromString(*file));
  EXPECT_EQ(descriptor.name(), "dflash/v1/dflash.proto");
  EXPECT_EQ(descriptor.package(), "dflash.v1");
  ASSERT_EQ(descriptor.service_size(), 1);
  const google::protobuf::ServiceDescriptorProto& service = descriptor.service(0);
  EXPECT_EQ(service.name(), "InferenceService");
  std::map<std::string, bool> streaming;
  for (const auto& method : service.method()) {
    EXPECT_EQ(method.client_streaming(), method.server_streaming()) << method.name();
    streaming[method.name()] = method.client_streaming();
  }
  const std::map<std::string, bool> expected = {
      {"Classify", false},   {"ClassifyStream", true}, {"ZeroShot", false},
      {"Rerank", false},     {"RerankStream", true},   {"Embed", false},
      {"EmbedStream", true}, {"TokenClassify", false}, {"TokenClassifyStream", true},
      {"Tokenize", false},   {"Info", false}};
  EXPECT_EQ(streaming, expected);
  EXPECT_FALSE(ReflectionFileContainingSymbol(server.channel(), "dflash.v1.NoSuchService").ok());
}

}  // namespace
}  // namespace dflash::e2e
