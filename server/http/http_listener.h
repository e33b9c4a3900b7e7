// An HTTP/1.1 server on libmicrohttpd for the JSON routes: keep-alive, optional TLS, bounded
// headers and bodies, an idle timeout that also bounds slow clients, and asynchronous answers.
// The handler is called once a request is complete (headers and body) and answers through an
// HttpResponder, from any thread, at any later time: the connection is suspended meanwhile, so no
// listener thread waits for the engine. Requests that cannot be framed safely are refused here,
// before any handler sees them: conflicting or repeated Content-Length / Transfer-Encoding headers
// (request smuggling) with 400, a body over the limit with 413, a connection without a client
// certificate of the client CA (mutual TLS) with 403.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/http/hangup_watch.h"

struct MHD_Daemon;

namespace dflash::microhttpd {
class DaemonLog;
}  // namespace dflash::microhttpd

namespace dflash::http {

class ConnectionAcceptor;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // Decoded, without the query.
  // Header names lower-case, in arrival order.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Set by the listener when the client hangs up before its answer is written; the front makes
  // it the call's cancellation flag. Null for a request not from a listener.
  std::shared_ptr<std::atomic<bool>> client_gone;

  // The first header called `name` (lower-case), or null.
  const std::string* Header(absl::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Called exactly once per request, from any thread.
using HttpResponder = absl::AnyInvocable<void(HttpResponse)>;
using HttpHandler = absl::AnyInvocable<void(HttpRequest, HttpResponder)>;

struct HttpListenerOptions {
  std::string listen_address;  // "host:port"; port 0 picks a free port.
  // PEM text; both empty: plaintext.
  std::string tls_cert_pem;
  std::string tls_key_pem;
  // PEM text of a CA (TLS only): mutual TLS, every request's connection must carry a client
  // certificate that this CA signed, else it is refused with 403 before any handler sees it.
  std::string tls_client_ca_pem;
  size_t max_body_bytes = size_t{16} << 20;
  // Bytes of one request's line and headers (more: 431 from libmicrohttpd).
  size_t max_header_bytes = size_t{8} << 10;
  // A connection that sends or receives nothing for this long is closed: an idle keep-alive
  // connection, and a client that stalls in its headers or body. Whole seconds, at least 1.
  absl::Duration idle_timeout = absl::Seconds(30);
  unsigned int threads = 2;
  unsigned int max_connections = 4096;
  // Renders the listener's own refusals (400 for framing, 413 for size) for the request's path,
  // in the error format of the API the path belongs to. Unset: a TEI-style body.
  std::function<HttpResponse(absl::string_view path, int status, absl::string_view message)>
      render_error;
};

class HttpListener {
 public:
  // Listens and serves until destroyed. `handler` must be thread-safe (the listener's threads
  // call it concurrently). Errors name the address.
  static absl::StatusOr<std::unique_ptr<HttpListener>> Start(HttpListenerOptions options,
                                                             HttpHandler handler);
  // Closes the listening socket and every connection. Every request handed to the handler must
  // have been answered.
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  int port() const { return port_; }
  // Stops accepting connections (new ones are refused from its return on); requests on open
  // connections are still served, and their answers close the connection. Not concurrent with
  // itself.
  void StopAccepting();
  // Waits until every request handed to the handler has had its answer written (or its client
  // gone), or `deadline` passes.
  void WaitForAnswersSent(absl::Time deadline);

  struct Connection;  // One request's state (libmicrohttpd's per-request pointer).

 private:
  friend struct ListenerCallbacks;
  HttpResponse Refusal(absl::string_view path, int status, absl::string_view message) const;
  explicit HttpListener(HttpListenerOptions options, HttpHandler handler);

  HttpListenerOptions options_;
  HttpHandler handler_;
  // What libmicrohttpd reports; outlives daemon_.
  std::unique_ptr<microhttpd::DaemonLog> daemon_log_;
  // The sockets of suspended connections, for their clients' hang-ups; outlives daemon_.
  std::unique_ptr<HangupWatch> hangups_;
  // Accepts the connections the daemon serves; outlives daemon_.
  std::unique_ptr<ConnectionAcceptor> acceptor_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
  std::atomic<bool> closing_{false};
  std::mutex pending_mutex_;
  std::condition_variable pending_done_;
  int64_t pending_ = 0;  // Handed to the handler, not yet completed.
};

}  // namespace dflash::http
