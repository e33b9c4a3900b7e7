#include "server/http/http_errors.h"

#include <nlohmann/json.hpp>

#include "absl/strings/cord.h"
#include "server/service/call_context.h"

namespace dflash::http {
namespace {

constexpr char kMalformedBodyPayload[] = "dflash.dev/http-malformed-body";
constexpr char kEmptyInputPayload[] = "dflash.dev/http-empty-input";

// Seconds a client is asked to wait before retrying an overloaded or draining server.
constexpr char kRetryAfterSeconds[] = "1";

absl::string_view TeiErrorType(int http_status, bool empty) {
  if (empty) return "Empty";
  switch (http_status) {
    case 429:
      return "Overloaded";
    case 503:
      return "Unhealthy";
    case 424:
    case 500:
    case 504:
      return "Backend";
    case 401:
    case 403:
      return "Unauthorized";
    default:
      return "Validation";
  }
}

absl::string_view OpenAiErrorType(int http_status) {
  switch (http_status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "invalid_request_error";
    case 429:
      return "rate_limit_error";
    case 500:
    case 503:
    case 504:
      return "server_error";
    default:
      return "invalid_request_error";
  }
}

// OpenAI's machine-readable `code`, or null.
nlohmann::json OpenAiErrorCode(int http_status) {
  switch (http_status) {
    case 401:
      return "invalid_api_key";
    case 404:
      return "model_not_found";
    case 429:
      return "rate_limit_exceeded";
    case 503:
      return "service_unavailable";
    default:
      return nullptr;
  }
}

HttpResponse Render(ApiFamily family, int http_status, absl::string_view message, bool empty) {
  nlohmann::json body;
  const std::string text(message);
  switch (family) {
    case ApiFamily::kTei:
      body = {{"error", text}, {"error_type", TeiErrorType(http_status, empty)}};
      break;
    case ApiFamily::kOpenAi:
      body = {{"error",
               {{"message", text},
                {"type", OpenAiErrorType(http_status)},
                {"param", nullptr},
                {"code", OpenAiErrorCode(http_status)}}}};
      break;
    case ApiFamily::kCohere:
      body = {{"message", text}};
      break;
  }
  HttpResponse response;
  response.status = http_status;
  response.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (http_status == 429 || http_status == 503) {
    response.headers.emplace_back("Retry-After", kRetryAfterSeconds);
  }
  return response;
}

}  // namespace

absl::Status MalformedBody(absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kMalformedBodyPayload, absl::Cord());
  return status;
}

absl::Status EmptyInput(absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kEmptyInputPayload, absl::Cord());
  return status;
}

int HttpStatusFor(ApiFamily family, const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      if (status.GetPayload(kMalformedBodyPayload).has_value() ||
          status.GetPayload(kEmptyInputPayload).has_value()) {
        return 400;
      }
      return family == ApiFamily::kTei ? 422 : 400;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kAlreadyExists:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kResourceExhausted:
      return serving::IsRetryable(status) ? 429 : 413;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kCancelled:
      return 499;  // The client went away; nobody reads this answer.
    case absl::StatusCode::kUnimplemented:
      return 501;
    default:
      return family == ApiFamily::kTei ? 424 : 500;
  }
}

HttpResponse ErrorResponse(ApiFamily family, const absl::Status& status) {
  return Render(family, HttpStatusFor(family, status), status.message(),
                status.GetPayload(kEmptyInputPayload).has_value());
}

HttpResponse ErrorResponse(ApiFamily family, int http_status, absl::string_view message) {
  return Render(family, http_status, message, /*empty=*/false);
}

}  // namespace dflash::http
