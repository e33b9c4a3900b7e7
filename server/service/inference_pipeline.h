// The transport-independent request path: validate, tokenize (on the worker pool), queue on the
// model's batcher, and turn engine outputs into API responses. The gRPC unary and streaming
// handlers both drive it; tests drive it directly. Each RPC's own logic lives in <rpc>_rpc.cc.
//
// Every method returns at once and calls `respond` exactly once, from some thread, with the
// response or a status whose code follows the API's rules (dflash.proto, "Errors").
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dflash/v1/dflash.pb.h"
#include "server/service/call_context.h"
#include "server/service/model_catalog.h"
#include "server/service/request_options.h"
#include "server/service/service_metrics.h"
#include "server/service/worker_pool.h"
#include "server/tokenizer/tokenizer.h"

namespace dflash::serving {

struct ServerIdentity {
  std::string version;
  std::string revision;
};

// Inputs given as token ids of the model's vocabulary instead of text (the HTTP front's token-id
// inputs): element i, when set, stands for input i of the request, whose text is then ignored.
// The ids are the model sequence as given (Tokenizer::EncodeIds): nothing is added.
using TokenIdInputs = std::vector<std::optional<std::vector<int32_t>>>;

// Token ids back to text (the HTTP front's TEI /decode); dflash.v1 has no Decode RPC.
struct DecodeRequest {
  std::string model;  // "": the first served model.
  std::vector<std::vector<int32_t>> ids;
  bool skip_special_tokens = true;
};
struct DecodeResponse {
  std::vector<std::string> texts;  // One per id list.
  // The answer's size, for the same response-size limit as the RPCs' answers.
  size_t ByteSizeLong() const;
};

// Protobuf bytes per result entry beyond its text (tags, lengths, ids, scores): what the
// up-front response-size checks add for each result they estimate.
inline constexpr size_t kResultEntryBytes = 32;

class InferencePipeline {
 public:
  // `metrics` may be null. Nothing is owned; all must outlive the pipeline. An answer larger
  // than `max_response_bytes` (the transport's send limit, less its framing) is refused with
  // RESOURCE_EXHAUSTED instead of being built and then failing to send.
  InferencePipeline(const ModelCatalog& catalog, WorkerPool& pool, ServiceMetrics* metrics,
                    ServerIdentity identity, size_t max_response_bytes = kDefaultMaxResponseBytes)
      : catalog_(catalog),
        pool_(pool),
        metrics_(metrics),
        identity_(std::move(identity)),
        max_response_bytes_(max_response_bytes) {}

  static constexpr size_t kDefaultMaxResponseBytes = size_t{16} << 20;

  void Classify(const v1::ClassifyRequest& request, CallContext call,
                Responder<v1::ClassifyResponse> respond);
  void ZeroShot(const v1::ZeroShotRequest& request, CallContext call,
                Responder<v1::ZeroShotResponse> respond);
  void Rerank(const v1::RerankRequest& request, CallContext call,
              Responder<v1::RerankResponse> respond);
  void Embed(const v1::EmbedRequest& request, CallContext call,
             Responder<v1::EmbedResponse> respond);
  // Embed with the inputs that `token_ids` sets given as ids (`token_ids` is empty or has one
  // element per input, and must outlive the call to `respond`).
  void EmbedWithIds(const v1::EmbedRequest& request, const TokenIdInputs& token_ids,
                    CallContext call, Responder<v1::EmbedResponse> respond);
  // The tokenizer alone, on the worker pool; nothing is queued. INVALID_ARGUMENT naming the list
  // and index for an id outside the vocabulary, FAILED_PRECONDITION when the model's tokenizer
  // has no decoder this server implements.
  void Decode(const DecodeRequest& request, CallContext call, Responder<DecodeResponse> respond);
  void Tokenize(const v1::TokenizeRequest& request, CallContext call,
                Responder<v1::TokenizeResponse> respond);
  void TokenClassify(const v1::TokenClassifyRequest& request, CallContext call,
                     Responder<v1::TokenClassifyResponse> respond);
  absl::StatusOr<v1::InfoResponse> Info(const v1::InfoRequest& request) const;

  const ModelCatalog& catalog() const { return catalog_; }

 private:
  // One model sequence after tokenization.
  struct Sequence {
    SequenceInput input;
    bool truncated = false;
  };
  // The outcome of RunSequences.
  struct ModelRun {
    ServedModel* model = nullptr;
    std::vector<Sequence> sequences;  // Token ids moved out; lengths and flags kept.
    std::vector<int> lengths;
    InferenceResult result;
    absl::Duration tokenization;
    int64_t truncated_count = 0;
  };
  using Encoder = std::function<absl::StatusOr<Sequence>(int index)>;

  // The shared path of the inference RPCs: runs `encode` for sequences [0, count) on the pool,
  // submits them as one request to `model`'s batcher and calls `finish` with the run or an error.
  void RunSequences(ServedModel* model, const CallContext& call, Priority priority,
                    uint32_t outputs, int count, Encoder encode,
                    absl::AnyInvocable<void(absl::StatusOr<ModelRun>)> finish);

  // The common start of every RPC but Info: resolves the request's model, wraps `respond` with
  // Measured, and checks the model can do `task` (when given). Returns null when it has already
  // answered (unknown model, unsupported task).
  template <typename Response>
  ServedModel* BeginRequest(absl::string_view rpc, absl::string_view requested_model,
                            std::optional<ServedTask> task, const CallContext& call,
                            Responder<Response>& respond);

  // RESOURCE_EXHAUSTED naming `what` when an answer of `bytes` would exceed max_response_bytes_:
  // checked before the work for answers whose size the request alone determines.
  absl::Status CheckResponseBudget(size_t bytes, absl::string_view what) const;

  // Wraps `respond` so the answer is counted in the metrics under `rpc` and `model` ("" when the
  // request named no served model) with the code the client receives: an answer over
  // max_response_bytes_ becomes RESOURCE_EXHAUSTED, one completed after the call's deadline
  // DEADLINE_EXCEEDED, and one for a cancelled call CANCELLED.
  template <typename Response>
  Responder<Response> Measured(absl::string_view rpc, absl::string_view model,
                               const CallContext& call, Responder<Response> respond);

  // Metadata of an answered inference request.
  void FillMetadata(const ModelRun& run, const CallContext& call, absl::string_view request_id,
                    v1::ResponseMetadata* metadata) const;

  const ModelCatalog& catalog_;
  WorkerPool& pool_;
  ServiceMetrics* metrics_;
  ServerIdentity identity_;
  const size_t max_response_bytes_;
};

// Converts an Encoding into a model sequence.
SequenceInput ToSequenceInput(Encoding encoding);

// `status` with "<field>: " in front of its message (OK stays OK).
absl::Status WithField(const absl::Status& status, absl::string_view field);

// The model sequence of tokenized texts (`second` may be null), as Tokenizer::Encode assembles
// it; the texts' own errors name them already, an assembly error (truncation that cannot be met)
// names `field`.
absl::StatusOr<Encoding> AssembleInput(const Tokenizer& tokenizer, const TextTokens& first,
                                       const TextTokens* second,
                                       const TruncationOptions& truncation,
                                       absl::string_view field);

// Checks and tokenizes one TextInput (a text or a pair) named `field` in errors, with the
// truncation of its kind (single or pair); the result equals Tokenizer::Encode's. Each text is
// checked once, by the tokenizer, naming `field`.text or `field`.text_pair.
absl::StatusOr<Encoding> EncodeTextInput(const ServedModel& model, const v1::TextInput& input,
                                         const RequestTruncation& truncation,
                                         absl::string_view field);

// Checks and tokenizes one text named `field` in errors, truncated as a single text.
absl::StatusOr<Encoding> EncodeSingleText(const ServedModel& model, absl::string_view text,
                                          const RequestTruncation& truncation,
                                          absl::string_view field);

// Checks and wraps one token-id input named `field` in errors: the ids as the model sequence,
// truncated as a single text is.
absl::StatusOr<Encoding> EncodeIdInput(const ServedModel& model, absl::Span<const int32_t> ids,
                                       const RequestTruncation& truncation,
                                       absl::string_view field);

}  // namespace dflash::serving
