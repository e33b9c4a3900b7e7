// Errors as each HTTP API family writes them: an absl::Status from the pipeline (or from request
// parsing) becomes an HTTP status and the family's error body.
//   TEI:    {"error": "...", "error_type": "Validation" | "Empty" | "Overloaded" | "Backend" |
//           "Unhealthy" | ...}
//   OpenAI: {"error": {"message": "...", "type": "...", "param": null, "code": "..."}}
//   Cohere: {"message": "..."}
// Status codes: INVALID_ARGUMENT 422 (TEI) or 400 (OpenAI, Cohere); a body that is not JSON 400;
// an empty input list 400 (TEI's "Empty"); NOT_FOUND 404; FAILED_PRECONDITION 400;
// UNAUTHENTICATED 401; RESOURCE_EXHAUSTED 429 with Retry-After when a retry can succeed, else
// 413; UNAVAILABLE 503 with Retry-After; DEADLINE_EXCEEDED 504; INTERNAL 424 (TEI) or 500.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/http/api_family.h"
#include "server/http/http_listener.h"

namespace dflash::http {

// Marks an INVALID_ARGUMENT as "the body is not a JSON document" (400 in every family).
absl::Status MalformedBody(absl::string_view message);
// Marks an INVALID_ARGUMENT as "an input list is empty" (TEI's "Empty" error, 400).
absl::Status EmptyInput(absl::string_view message);

// The HTTP status for `status` (not OK) in `family`.
int HttpStatusFor(ApiFamily family, const absl::Status& status);

// The error answer for `status` (not OK).
HttpResponse ErrorResponse(ApiFamily family, const absl::Status& status);
// An error answer with an explicit HTTP status (routing and framing errors).
HttpResponse ErrorResponse(ApiFamily family, int http_status, absl::string_view message);

}  // namespace dflash::http
