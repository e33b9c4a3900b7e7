#include "server/service/serving_runtime.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "server/http/http_errors.h"

namespace dflash::serving {
namespace {

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const TlsConfig& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  DFLASH_ASSIGN_OR_RETURN(pair.private_key, ReadFile(tls.key_file));
  DFLASH_ASSIGN_OR_RETURN(pair.cert_chain, ReadFile(tls.cert_file));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!tls.client_ca_file.empty()) {
    // Mutual TLS: a client must present a certificate signed by this CA.
    DFLASH_ASSIGN_OR_RETURN(options.pem_root_certs, ReadFile(tls.client_ca_file));
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServingRuntime>> ServingRuntime::Start(const ServerConfig& config,
                                                                      ServerIdentity identity,
                                                                      ModelLoader loader) {
  if (!loader) loader = &ServedModel::Load;
  std::unique_ptr<ServingRuntime> runtime(new ServingRuntime());
  DFLASH_ASSIGN_OR_RETURN(
      runtime->metrics_,
      ServiceMetrics::Create(runtime->registry_, identity.version, identity.revision));
  // Free device memory moves while serving (other processes, allocators): every scrape reads it
  // again, once per device (models sharing a device share its free memory), through one of the
  // engines on it. What the hook reads outlives its calls: the metrics endpoint, declared last in
  // ServingRuntime, stops first.
  std::vector<std::pair<std::string, const Engine*>> memory_sources;
  for (const ModelEntry& entry : config.models) {
    dflash::Log().info("loading model '{}' from {}", entry.name, entry.path.string());
    const absl::Time start = absl::Now();
    DFLASH_ASSIGN_OR_RETURN(std::unique_ptr<ServedModel> model,
                            loader(entry, runtime->metrics_->ObserverFor(entry.name)));
    const EngineInfo engine = model->engine_info();
    runtime->metrics_->SetModelInfo(entry.name, engine.backend, engine.device, engine.dtype,
                                    engine.tuning);
    const std::vector<EngineInfo> devices = model->engine_infos();
    for (size_t i = 0; i < devices.size(); ++i) {
      const EngineInfo& device = devices[i];
      if (device.device_total_bytes == 0) continue;  // The null engine has no memory to show.
      runtime->metrics_->SetDeviceMemory(device.device, "weights",
                                         static_cast<double>(device.weight_bytes));
      runtime->metrics_->SetDeviceMemory(device.device, "workspace",
                                         static_cast<double>(device.workspace_bytes));
      runtime->metrics_->SetDeviceMemory(device.device, "free",
                                         static_cast<double>(device.device_free_bytes));
      runtime->metrics_->SetDeviceMemory(device.device, "total",
                                         static_cast<double>(device.device_total_bytes));
      const bool seen =
          std::any_of(memory_sources.begin(), memory_sources.end(),
                      [&](const auto& source) { return source.first == device.device; });
      if (!seen) {
        memory_sources.emplace_back(device.device, &model->scheduler().engine(static_cast<int>(i)));
      }
    }
    dflash::Log().info("model '{}' ready in {:.2f} s: {} on {}, {}, max input {} tokens",
                       entry.name, absl::ToDoubleSeconds(absl::Now() - start), engine.backend,
                       engine.device, engine.dtype, model->max_input_length());
    DFLASH_RETURN_IF_ERROR(runtime->catalog_.Add(std::move(model)));
  }
  runtime->registry_.AddCollectHook(
      [metrics = runtime->metrics_.get(), sources = std::move(memory_sources)] {
        for (const auto& [device, engine] : sources) {
          const int64_t free_bytes = engine->FreeDeviceBytes();
          if (free_bytes >= 0) {
            metrics->SetDeviceMemory(device, "free", static_cast<double>(free_bytes));
          }
        }
      });
  runtime->pool_ = std::make_unique<WorkerPool>(config.worker_threads);
  const ServerIdentity kserve_identity = identity;
  // A stream wraps each answer in one more message (a tag and a length): the pipeline's limit
  // leaves room for it under the send limit.
  constexpr int kStreamEnvelopeBytes = 16;
  runtime->pipeline_ = std::make_unique<InferencePipeline>(
      runtime->catalog_, *runtime->pool_, runtime->metrics_.get(), std::move(identity),
      static_cast<size_t>(std::max(config.max_message_bytes - kStreamEnvelopeBytes, 1)));
  runtime->admission_ =
      std::make_unique<CallAdmission>(config.max_inflight_requests, runtime->metrics_.get());
  DFLASH_ASSIGN_OR_RETURN(runtime->authenticator_, ApiKeyAuthenticator::FromConfig(config.auth));
  runtime->service_ = std::make_unique<InferenceService>(
      *runtime->pipeline_, *runtime->admission_, runtime->authenticator_.get(),
      runtime->metrics_.get(), config.logging.log_request_content);
  runtime->kserve_service_ = std::make_unique<kserve::KserveService>(
      *runtime->pipeline_, *runtime->admission_, runtime->authenticator_.get(),
      runtime->metrics_.get(), kserve_identity);
  DFLASH_RETURN_IF_ERROR(runtime->StartGrpc(config));
  DFLASH_RETURN_IF_ERROR(runtime->StartHttp(config));
  if (!config.metrics_listen.empty()) {
    DFLASH_ASSIGN_OR_RETURN(
        runtime->metrics_server_,
        metrics::MetricsHttpServer::Start(config.metrics_listen, runtime->registry_));
  }
  return runtime;
}

absl::Status ServingRuntime::StartGrpc(const ServerConfig& config) {
  DFLASH_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                          ServerCredentials(config.tls));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.listen, credentials, &port_);
  builder.SetMaxReceiveMessageSize(config.max_message_bytes);
  builder.SetMaxSendMessageSize(config.max_message_bytes);
  // Over this limit gRPC fails the call's whole connection, every other call on it included.
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, config.max_metadata_bytes);
  if (config.max_concurrent_streams > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, config.max_concurrent_streams);
  }
  builder.RegisterService(service_.get());
  builder.RegisterService(kserve_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", config.listen,
                     " (address in use, not a local address, or malformed; expected host:port)"));
  }
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus("", true);
  health->SetServingStatus(kInferenceServiceName, true);
  health->SetServingStatus(kserve::kKserveServiceName, true);
  return absl::OkStatus();
}

absl::Status ServingRuntime::StartHttp(const ServerConfig& config) {
  if (config.http_listen.empty()) return absl::OkStatus();
  http_front_ = std::make_unique<http::HttpFront>(
      *pipeline_, *admission_, authenticator_.get(), metrics_.get(), config.max_inflight_requests,
      config.worker_threads > 0 ? config.worker_threads : pool_->size());
  http::HttpListenerOptions options;
  options.listen_address = config.http_listen;
  if (config.tls.enabled()) {
    DFLASH_ASSIGN_OR_RETURN(options.tls_cert_pem, ReadFile(config.tls.cert_file));
    DFLASH_ASSIGN_OR_RETURN(options.tls_key_pem, ReadFile(config.tls.key_file));
    if (!config.tls.client_ca_file.empty()) {
      DFLASH_ASSIGN_OR_RETURN(options.tls_client_ca_pem, ReadFile(config.tls.client_ca_file));
    }
  }
  options.max_body_bytes = static_cast<size_t>(config.max_message_bytes);
  options.max_header_bytes = static_cast<size_t>(config.max_metadata_bytes);
  options.idle_timeout = config.http_idle_timeout;
  options.render_error = [](absl::string_view path, int status, absl::string_view message) {
    return http::ErrorResponse(http::FamilyOfPath(path), status, message);
  };
  DFLASH_ASSIGN_OR_RETURN(
      http_listener_,
      http::HttpListener::Start(
          std::move(options),
          [front = http_front_.get()](http::HttpRequest request, http::HttpResponder respond) {
            front->Handle(std::move(request), std::move(respond));
          }));
  dflash::Log().info("HTTP/JSON routes on port {}", http_listener_->port());
  return absl::OkStatus();
}

DrainResult ServingRuntime::Drain(absl::Duration grace) {
  DrainResult result;
  if (drained_) return result;
  drained_ = true;
  const absl::Time deadline = absl::Now() + grace;
  // Load balancers and Kubernetes see NOT_SERVING first and stop sending new traffic.
  if (server_ != nullptr) server_->GetHealthCheckService()->Shutdown();
  if (admission_ != nullptr) {
    admission_->StartDraining();
    // New HTTP connections are refused; requests on open ones get 503 from admission.
    if (http_listener_ != nullptr) http_listener_->StopAccepting();
    if (!admission_->WaitIdle(deadline, /*interruptible=*/true)) {
      // The grace period is over: what is still queued would keep the process past it.
      result.unavailable_at_deadline = catalog_.AbortQueuedAll(absl::UnavailableError(
          "the server is shutting down and its drain grace period ended before this request "
          "was computed; retry on another replica"));
      admission_->WaitIdle(absl::Now() + kDrainAnswerMargin);
    }
  }
  // Nothing is queued any more unless the grace period let it all be answered; the workers end
  // with their last batch.
  catalog_.ShutdownAll();
  if (admission_ != nullptr) result.unanswered = admission_->inflight();
  if (server_ != nullptr) {
    // Every accepted request is answered by now (or counted above): a short margin lets the last
    // answers be written, then idle streams and late calls are cancelled.
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    server_->Wait();
  }
  // Every admitted HTTP request has its answer (or was counted above); as for gRPC, a short
  // margin lets the last answers be written before the connections close.
  if (http_listener_ != nullptr) http_listener_->WaitForAnswersSent(absl::Now() + absl::Seconds(1));
  http_listener_.reset();
  metrics_server_.reset();
  return result;
}

void ServingRuntime::EndGracePeriod() {
  if (admission_ != nullptr) admission_->Interrupt();
}

ServingRuntime::~ServingRuntime() { Drain(absl::ZeroDuration()); }

}  // namespace dflash::serving
