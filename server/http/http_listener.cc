#include "server/http/http_listener.h"

#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/http/connection_acceptor.h"
#include "server/microhttpd/daemon_log.h"

namespace dflash::http {

const std::string* HttpRequest::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return &value;
  }
  return nullptr;
}

// What one request's answer needs, shared by the listener and the responder: the responder may
// run on any thread, before or after the listener suspends the connection, or after the client
// has gone (then the answer is dropped).
struct Completion {
  std::mutex mutex;
  MHD_Connection* connection = nullptr;
  bool suspended = false;
  uint64_t hangup_watch = 0;  // While suspended: the HangupWatch id of the connection's socket.
  bool closed = false;        // libmicrohttpd is done with the request; `connection` is stale.
  std::optional<HttpResponse> response;
};

struct HttpListener::Connection {
  HttpRequest request;
  size_t body_limit = 0;
  bool body_too_large = false;
  size_t discarded = 0;
  std::shared_ptr<Completion> completion;  // Set once the request went to the handler.
};

namespace {

// Bytes of an over-limit body read (and dropped) so that its 413 can be sent on a connection in
// a clean state; past this many, the connection is closed instead.
constexpr size_t kMaxDiscardedBodyBytes = size_t{4} << 20;

MHD_Result Queue(MHD_Connection* connection, const HttpResponse& answer, bool close) {
  MHD_Response* response = MHD_create_response_from_buffer(
      answer.body.size(), const_cast<char*>(answer.body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;  // Out of memory: libmicrohttpd closes the connection.
  MHD_Result result =
      MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, answer.content_type.c_str());
  for (const auto& [name, value] : answer.headers) {
    if (result == MHD_YES) result = MHD_add_response_header(response, name.c_str(), value.c_str());
  }
  if (result == MHD_YES && close) {
    result = MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
  }
  if (result == MHD_YES) result = MHD_queue_response(connection, answer.status, response);
  MHD_destroy_response(response);
  return result;
}

struct HeaderScan {
  std::vector<std::pair<std::string, std::string>>* headers;
  int content_lengths = 0;
  int transfer_encodings = 0;
  std::string transfer_encoding;
};

MHD_Result CollectHeader(void* cls, MHD_ValueKind /*kind*/, const char* key, size_t key_size,
                         const char* value, size_t value_size) {
  auto& scan = *static_cast<HeaderScan*>(cls);
  std::string name = absl::AsciiStrToLower(absl::string_view(key, key_size));
  if (name == "content-length") ++scan.content_lengths;
  if (name == "transfer-encoding") {
    ++scan.transfer_encodings;
    scan.transfer_encoding = std::string(value == nullptr ? "" : value, value_size);
  }
  scan.headers->emplace_back(std::move(name),
                             std::string(value == nullptr ? "" : value, value_size));
  return MHD_YES;
}

// Why the request's framing headers are refused (request smuggling: a front proxy and this server
// could disagree on where the body ends), or "".
std::string FramingProblem(const HeaderScan& scan) {
  if (scan.content_lengths > 1) return "more than one Content-Length header";
  if (scan.transfer_encodings > 1) return "more than one Transfer-Encoding header";
  if (scan.transfer_encodings == 1 && scan.content_lengths == 1) {
    return "both Content-Length and Transfer-Encoding headers";
  }
  if (scan.transfer_encodings == 1 &&
      !absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(scan.transfer_encoding), "chunked")) {
    return "a Transfer-Encoding other than chunked";
  }
  return "";
}

// Why the connection's client certificate is not accepted under mutual TLS ("" when it is): the
// TLS session requests one from the client (MHD_OPTION_HTTPS_MEM_TRUST) but does not require it,
// so every request checks that one came and that the client CA signed it.
std::string ClientCertificateProblem(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (info == nullptr || info->tls_session == nullptr) return "the connection is not TLS";
  auto session = static_cast<gnutls_session_t>(info->tls_session);
  unsigned int count = 0;
  if (gnutls_certificate_get_peers(session, &count) == nullptr || count == 0) {
    return "this server requires a TLS client certificate (mutual TLS); the connection has none";
  }
  unsigned int verification = 0;
  if (gnutls_certificate_verify_peers2(session, &verification) != GNUTLS_E_SUCCESS ||
      verification != 0) {
    return "the TLS client certificate is not signed by the server's client CA";
  }
  return "";
}

}  // namespace

struct ListenerCallbacks {
  static MHD_Result Access(void* cls, MHD_Connection* connection, const char* url,
                           const char* method, const char* /*version*/, const char* upload_data,
                           size_t* upload_data_size, void** request_state) {
    auto& listener = *static_cast<HttpListener*>(cls);
    auto* state = static_cast<HttpListener::Connection*>(*request_state);
    const bool close = listener.closing_.load(std::memory_order_relaxed);
    if (state == nullptr) {  // Headers are in.
      state = new HttpListener::Connection();
      *request_state = state;
      state->request.method = method;
      state->request.path = url;
      HeaderScan scan{&state->request.headers, 0, 0, ""};
      MHD_get_connection_values_n(connection, MHD_HEADER_KIND, &CollectHeader, &scan);
      if (const std::string problem = FramingProblem(scan); !problem.empty()) {
        return Queue(connection,
                     listener.Refusal(state->request.path, 400,
                                      absl::StrCat("malformed request: ", problem)),
                     /*close=*/true);
      }
      if (!listener.options_.tls_client_ca_pem.empty()) {
        if (const std::string problem = ClientCertificateProblem(connection); !problem.empty()) {
          return Queue(connection, listener.Refusal(state->request.path, 403, problem),
                       /*close=*/true);
        }
      }
      if (const std::string* length = state->request.Header("content-length")) {
        uint64_t bytes = 0;
        if (absl::SimpleAtoi(*length, &bytes) && bytes > listener.options_.max_body_bytes) {
          return Queue(connection,
                       listener.Refusal(state->request.path, 413,
                                        absl::StrCat("the request body has ", bytes,
                                                     " bytes, more than the server accepts (",
                                                     listener.options_.max_body_bytes, ")")),
                       /*close=*/true);
        }
      }
      return MHD_YES;
    }
    if (*upload_data_size != 0) {  // A piece of the body.
      const size_t size = *upload_data_size;
      *upload_data_size = 0;
      if (!state->body_too_large &&
          state->request.body.size() + size > listener.options_.max_body_bytes) {
        state->body_too_large = true;
        state->request.body.clear();
        state->request.body.shrink_to_fit();
      }
      if (state->body_too_large) {
        state->discarded += size;
        return state->discarded > kMaxDiscardedBodyBytes ? MHD_NO : MHD_YES;
      }
      state->request.body.append(upload_data, size);
      return MHD_YES;
    }
    if (state->body_too_large) {
      return Queue(connection,
                   listener.Refusal(state->request.path, 413,
                                    absl::StrCat("the request body is larger than the server "
                                                 "accepts (",
                                                 listener.options_.max_body_bytes, " bytes)")),
                   /*close=*/true);
    }
    if (state->completion == nullptr) {  // The request is complete: hand it over.
      auto completion = std::make_shared<Completion>();
      completion->connection = connection;
      state->completion = completion;
      auto client_gone = std::make_shared<std::atomic<bool>>(false);
      state->request.client_gone = client_gone;
      {
        std::lock_guard<std::mutex> lock(listener.pending_mutex_);
        ++listener.pending_;
      }
      HangupWatch* hangups = listener.hangups_.get();
      listener.handler_(std::move(state->request), [completion, hangups](HttpResponse response) {
        std::lock_guard<std::mutex> lock(completion->mutex);
        if (completion->closed) return;
        completion->response = std::move(response);
        if (completion->suspended) {
          // Back to libmicrohttpd's own polling, which sees a hang-up when it writes.
          hangups->Forget(std::exchange(completion->hangup_watch, 0));
          MHD_resume_connection(completion->connection);
        }
      });
      std::lock_guard<std::mutex> lock(completion->mutex);
      if (!completion->response.has_value()) {
        completion->suspended = true;
        MHD_suspend_connection(connection);
        if (const MHD_ConnectionInfo* info =
                MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
            info != nullptr) {
          completion->hangup_watch = hangups->Watch(info->connect_fd, std::move(client_gone));
        }
        return MHD_YES;
      }
    }
    // Answered (at once, or resumed by the responder).
    std::optional<HttpResponse> response;
    {
      std::lock_guard<std::mutex> lock(state->completion->mutex);
      state->completion->suspended = false;
      response.swap(state->completion->response);
    }
    if (!response.has_value()) return MHD_NO;  // Cannot happen: resumed only once answered.
    return Queue(connection, *response, close);
  }

  static void ConnectionEvent(void* cls, MHD_Connection* /*connection*/, void** /*socket_context*/,
                              MHD_ConnectionNotificationCode code) {
    // Opened connections were counted when handed over.
    if (code == MHD_CONNECTION_NOTIFY_CLOSED)
      static_cast<ConnectionAcceptor*>(cls)->ConnectionClosed();
  }

  static void Completed(void* cls, MHD_Connection* /*connection*/, void** request_state,
                        MHD_RequestTerminationCode /*code*/) {
    auto* state = static_cast<HttpListener::Connection*>(*request_state);
    if (state == nullptr) return;
    if (state->completion != nullptr) {
      auto& listener = *static_cast<HttpListener*>(cls);
      {
        std::lock_guard<std::mutex> lock(state->completion->mutex);
        state->completion->closed = true;
        listener.hangups_->Forget(std::exchange(state->completion->hangup_watch, 0));
      }
      std::lock_guard<std::mutex> lock(listener.pending_mutex_);
      if (--listener.pending_ == 0) listener.pending_done_.notify_all();
    }
    delete state;
    *request_state = nullptr;
  }
};

HttpResponse HttpListener::Refusal(absl::string_view path, int status,
                                   absl::string_view message) const {
  if (options_.render_error) return options_.render_error(path, status, message);
  HttpResponse response;
  response.status = status;
  response.body = absl::StrCat(R"({"error":")", message, R"(","error_type":"Validation"})");
  return response;
}

HttpListener::HttpListener(HttpListenerOptions options, HttpHandler handler)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      daemon_log_(std::make_unique<microhttpd::DaemonLog>("http listener", spdlog::level::debug)) {}

absl::StatusOr<std::unique_ptr<HttpListener>> HttpListener::Start(HttpListenerOptions options,
                                                                  HttpHandler handler) {
  const std::string address = options.listen_address;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP listen address '", address, "' is not host:port"));
  }
  absl::string_view host(address.data(), colon);
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  const std::string host_text(host);
  const std::string port_text = address.substr(colon + 1);
  uint32_t port_number = 0;
  if (!absl::SimpleAtoi(port_text, &port_number) || port_number > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP listen address '", address, "' has no valid port"));
  }
  const bool tls = !options.tls_cert_pem.empty();
  if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    return absl::FailedPreconditionError(
        "TLS is configured but this libmicrohttpd is built without TLS support");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  if (const int error = getaddrinfo(host_text.c_str(), port_text.c_str(), &hints, &addresses);
      error != 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on '", address,
                                               "': cannot resolve '", host_text,
                                               "': ", gai_strerror(error)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned_addresses(addresses, &freeaddrinfo);

  std::unique_ptr<HttpListener> listener(new HttpListener(std::move(options), std::move(handler)));
  absl::StatusOr<std::unique_ptr<HangupWatch>> hangups = HangupWatch::Start();
  if (!hangups.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot serve HTTP on '", address,
                     "': watching client hang-ups: ", hangups.status().message()));
  }
  listener->hangups_ = *std::move(hangups);
  const HttpListenerOptions& settings = listener->options_;
  const unsigned int timeout_seconds =
      static_cast<unsigned int>(std::max<int64_t>(1, absl::ToInt64Seconds(settings.idle_timeout)));
  // The connection's memory pool holds its request line, headers and read buffer: room for the
  // configured headers plus a 16 KiB buffer.
  const size_t memory_limit = settings.max_header_bytes + (size_t{16} << 10);
  // A name may resolve to several addresses (localhost: ::1 and 127.0.0.1): the first that can be
  // bound is served.
  absl::Status bind_failure = absl::UnavailableError("no IPv4 or IPv6 address");
  for (const addrinfo* candidate = addresses;
       candidate != nullptr && listener->acceptor_ == nullptr; candidate = candidate->ai_next) {
    if (candidate->ai_family != AF_INET && candidate->ai_family != AF_INET6) continue;
    absl::StatusOr<std::unique_ptr<ConnectionAcceptor>> acceptor =
        ConnectionAcceptor::Listen(*candidate, settings.max_connections);
    if (acceptor.ok()) {
      listener->acceptor_ = *std::move(acceptor);
    } else {
      bind_failure = acceptor.status();
    }
  }
  if (listener->acceptor_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve HTTP on '", address, "': ", bind_failure.message()));
  }
  // A pool of threads, each polling its connections with epoll: connections are many and mostly
  // idle between requests. The connections come from the acceptor (no listening socket of
  // libmicrohttpd's own). Suspend/resume lets a request wait for the engine without holding a
  // thread. No MHD_OPTION_THREAD_STACK_SIZE, as for the metrics endpoint: glibc's default stack
  // has room for the static TLS of the CUDA libraries the server links.
  const unsigned int threads = std::max(1u, settings.threads);
  unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_NO_LISTEN_SOCKET |
                       MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC | MHD_USE_ERROR_LOG;
  if (tls) flags |= MHD_USE_TLS;
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_EXTERNAL_LOGGER, reinterpret_cast<intptr_t>(&microhttpd::DaemonLog::Collect),
       listener->daemon_log_.get()},
      {MHD_OPTION_THREAD_POOL_SIZE, threads, nullptr},
      // The acceptor holds the connections to max_connections. libmicrohttpd splits its own limit
      // evenly between the threads and may queue a connection for a thread at its share; the
      // thread then refuses it on a path that leaves a mutex locked, which hangs the thread
      // (0.9.75). A share of max_connections per thread is never reached.
      {MHD_OPTION_CONNECTION_LIMIT, settings.max_connections * threads, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds, nullptr},
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<intptr_t>(memory_limit), nullptr},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&ListenerCallbacks::Completed),
       listener.get()},
      {MHD_OPTION_NOTIFY_CONNECTION,
       reinterpret_cast<intptr_t>(&ListenerCallbacks::ConnectionEvent), listener->acceptor_.get()},
      // Refuse what RFC 9112 lets a server refuse (bare LF, whitespace before a header's colon):
      // leniency there is what request smuggling exploits.
      {MHD_OPTION_STRICT_FOR_CLIENT, 1, nullptr},
  };
  if (tls) {
    items.push_back(
        {MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(settings.tls_cert_pem.c_str())});
    items.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(settings.tls_key_pem.c_str())});
    if (!settings.tls_client_ca_pem.empty()) {
      items.push_back(
          {MHD_OPTION_HTTPS_MEM_TRUST, 0, const_cast<char*>(settings.tls_client_ca_pem.c_str())});
    }
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  listener->daemon_ =
      MHD_start_daemon(flags, /*port=*/0, nullptr, nullptr, &ListenerCallbacks::Access,
                       listener.get(), MHD_OPTION_ARRAY, items.data(), MHD_OPTION_END);
  absl::Status started =
      listener->daemon_log_->EndStart(listener->daemon_, absl::StrCat("HTTP on '", address, "'"));
  if (!started.ok()) return started;
  listener->port_ = listener->acceptor_->port();
  listener->acceptor_->Start(
      [daemon = listener->daemon_](int socket, const sockaddr* peer, socklen_t peer_size) {
        // On failure libmicrohttpd closes the socket and says why through the daemon's log.
        return MHD_add_connection(daemon, socket, peer, peer_size) == MHD_YES;
      });
  return listener;
}

void HttpListener::StopAccepting() {
  closing_.store(true, std::memory_order_relaxed);
  if (acceptor_ != nullptr) acceptor_->Stop();
}

void HttpListener::WaitForAnswersSent(absl::Time deadline) {
  std::unique_lock<std::mutex> lock(pending_mutex_);
  pending_done_.wait_until(lock, absl::ToChronoTime(deadline), [this] { return pending_ == 0; });
}

HttpListener::~HttpListener() {
  // The acceptor first (it hands connections to the daemon), destroyed after the daemon (whose
  // threads report closed connections to it).
  if (acceptor_ != nullptr) acceptor_->Stop();
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

}  // namespace dflash::http
