#include "client/cli_run.h"

#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/cli_channel.h"
#include "client/cli_flags.h"
#include "client/cli_requests.h"
#include "dflash/v1/dflash.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace dflash::client {
namespace {

namespace v1 = dflash::v1;
namespace health = grpc::health::v1;
namespace pb = google::protobuf;

std::string StatusCodeName(grpc::StatusCode code) {
  // gRPC and absl number the codes alike (google.rpc.Code); absl has the canonical names.
  const std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "UNKNOWN_CODE" : name;
}

// Errors are one line so that scripts can read them with `read` or grep.
std::string OneLine(absl::string_view text) {
  return absl::StrReplaceAll(text, {{"\r\n", " "}, {"\n", " "}, {"\r", " "}});
}

int UsageFailure(const absl::Status& status, std::ostream& err) {
  err << "dflash-cli: " << OneLine(status.message()) << "\n";
  return kExitUsage;
}

// What every call of one run shares.
struct Session {
  const CliArgs& args;
  std::optional<std::string> api_key;
  std::ostream& out;
  std::ostream& err;
};

// Writes `message` as one JSON document (one line unless --pretty), with the proto field names
// and every scalar field, so the output's shape does not depend on the values.
bool PrintJson(const pb::Message& message, const Session& session) {
  pb::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.add_whitespace = session.args.pretty;
  std::string json;
  const auto status = pb::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    session.err << "dflash-cli: cannot print the response as JSON: "
                << OneLine(std::string(status.message().data(), status.message().size())) << "\n";
    return false;
  }
  // Neither printer ends the document with a newline.
  if (json.empty() || json.back() != '\n') json.push_back('\n');
  session.out << json << std::flush;  // each call's answer shows as soon as it arrives
  return true;
}

int RpcFailure(absl::string_view rpc, const grpc::Status& status, size_t call, size_t calls,
               std::ostream& err) {
  err << "dflash-cli: " << rpc;
  if (calls > 1) err << " (call " << call + 1 << " of " << calls << ")";
  err << ": " << StatusCodeName(status.error_code()) << ": " << OneLine(status.error_message())
      << "\n";
  return kExitRpcError;
}

// Sends `requests` one after the other and prints each answer; stops at the first failed call.
template <typename Response, typename Request, typename Call>
int RunCalls(absl::string_view rpc, const absl::StatusOr<std::vector<Request>>& requests,
             const Session& session, Call call) {
  if (!requests.ok()) return UsageFailure(requests.status(), session.err);
  for (size_t i = 0; i < requests->size(); ++i) {
    grpc::ClientContext context;
    PrepareContext(session.args, session.api_key, context);
    Response response;
    const grpc::Status status = call(&context, (*requests)[i], &response);
    if (!status.ok()) return RpcFailure(rpc, status, i, requests->size(), session.err);
    if (!PrintJson(response, session)) return kExitRpcError;
  }
  return kExitOk;
}

int RunHealth(const std::shared_ptr<grpc::Channel>& channel, const Session& session) {
  const std::unique_ptr<health::Health::Stub> stub = health::Health::NewStub(channel);
  grpc::ClientContext context;
  PrepareContext(session.args, session.api_key, context);
  health::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, BuildHealthRequest(session.args), &response);
  if (!status.ok()) return RpcFailure("Health.Check", status, 0, 1, session.err);
  if (!PrintJson(response, session)) return kExitRpcError;
  // A probe must fail unless the service serves.
  if (response.status() != health::HealthCheckResponse::SERVING) {
    session.err << "dflash-cli: health: "
                << (session.args.service.empty() ? std::string("the server")
                                                 : absl::StrCat("\"", session.args.service, "\""))
                << " is " << health::HealthCheckResponse::ServingStatus_Name(response.status())
                << "\n";
    return kExitRpcError;
  }
  return kExitOk;
}

}  // namespace

int RunCli(const std::vector<std::string>& argv, std::istream& in, std::ostream& out,
           std::ostream& err) {
  const absl::StatusOr<CliArgs> parsed = ParseArgs(argv);
  if (!parsed.ok()) return UsageFailure(parsed.status(), err);
  const CliArgs& args = *parsed;
  if (args.help) {
    out << HelpText(args.command);
    return kExitOk;
  }
  // Everything the user can get wrong is checked before the first call.
  const absl::StatusOr<std::vector<InputRecord>> inputs = CollectInputs(args, in);
  if (!inputs.ok()) return UsageFailure(inputs.status(), err);
  absl::StatusOr<std::optional<std::string>> api_key = ResolveApiKey(args);
  if (!api_key.ok()) return UsageFailure(api_key.status(), err);
  const absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = CreateChannel(args);
  if (!channel.ok()) return UsageFailure(channel.status(), err);

  const Session session{args, *std::move(api_key), out, err};
  if (*args.command == Command::kHealth) return RunHealth(*channel, session);
  const std::unique_ptr<v1::InferenceService::Stub> stub = v1::InferenceService::NewStub(*channel);
  switch (*args.command) {
    case Command::kClassify:
      return RunCalls<v1::ClassifyResponse>(
          "Classify", BuildClassifyRequests(args, *inputs), session,
          [&](grpc::ClientContext* context, const v1::ClassifyRequest& request,
              v1::ClassifyResponse* response) {
            return stub->Classify(context, request, response);
          });
    case Command::kZeroShot:
      return RunCalls<v1::ZeroShotResponse>(
          "ZeroShot", BuildZeroShotRequests(args, *inputs), session,
          [&](grpc::ClientContext* context, const v1::ZeroShotRequest& request,
              v1::ZeroShotResponse* response) {
            return stub->ZeroShot(context, request, response);
          });
    case Command::kRerank:
      return RunCalls<v1::RerankResponse>(
          "Rerank", BuildRerankRequests(args, *inputs), session,
          [&](grpc::ClientContext* context, const v1::RerankRequest& request,
              v1::RerankResponse* response) { return stub->Rerank(context, request, response); });
    case Command::kEmbed:
      return RunCalls<v1::EmbedResponse>(
          "Embed", BuildEmbedRequests(args, *inputs), session,
          [&](grpc::ClientContext* context, const v1::EmbedRequest& request,
              v1::EmbedResponse* response) { return stub->Embed(context, request, response); });
    case Command::kTokenize:
      return RunCalls<v1::TokenizeResponse>(
          "Tokenize", BuildTokenizeRequests(args, *inputs), session,
          [&](grpc::ClientContext* context, const v1::TokenizeRequest& request,
              v1::TokenizeResponse* response) {
            return stub->Tokenize(context, request, response);
          });
    case Command::kTokens:
      return RunCalls<v1::TokenClassifyResponse>(
          "TokenClassify", BuildTokenClassifyRequests(args, *inputs), session,
          [&](grpc::ClientContext* context, const v1::TokenClassifyRequest& request,
              v1::TokenClassifyResponse* response) {
            return stub->TokenClassify(context, request, response);
          });
    case Command::kInfo:
      return RunCalls<v1::InfoResponse>(
          "Info",
          absl::StatusOr<std::vector<v1::InfoRequest>>(
              std::vector<v1::InfoRequest>{BuildInfoRequest(args)}),
          session,
          [&](grpc::ClientContext* context, const v1::InfoRequest& request,
              v1::InfoResponse* response) { return stub->Info(context, request, response); });
    case Command::kHealth:
      break;  // handled above
  }
  return kExitUsage;
}

}  // namespace dflash::client
