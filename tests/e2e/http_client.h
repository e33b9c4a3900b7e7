// A minimal HTTP/1.1 client over a plain socket (or TLS, by GnuTLS) for the HTTP/JSON end-to-end
// tests: it sends exactly the bytes a test writes (so malformed and hostile requests can be sent
// too) and reads one response at a time, keeping the connection for the next request.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dflash::e2e {

struct HttpAnswer {
  int status = 0;
  std::map<std::string, std::string> headers;  // Lower-case names.
  std::string body;
};

// PEM files of a TLS connection.
struct TlsClientFiles {
  std::string ca_file;    // The CA the server's certificate must chain to (name "localhost").
  std::string cert_file;  // The client certificate and its key (mutual TLS); empty: none.
  std::string key_file;
};

class HttpClient {
 public:
  // Connects to 127.0.0.1:`port`.
  static absl::StatusOr<HttpClient> Connect(int port);
  // Connects to 127.0.0.1:`port` and completes a TLS handshake that verifies the server's
  // certificate.
  static absl::StatusOr<HttpClient> ConnectTls(int port, const TlsClientFiles& files);
  HttpClient(HttpClient&& other) noexcept;
  HttpClient& operator=(HttpClient&&) = delete;
  ~HttpClient();

  absl::Status SendRaw(absl::string_view bytes);
  // Reads one response (Content-Length or chunked body). Times out after kWaitLimit.
  absl::StatusOr<HttpAnswer> Read();
  // SendRaw of a request with a JSON body (and `extra_headers`, "Name: value\r\n" lines), then
  // Read.
  absl::StatusOr<HttpAnswer> Post(absl::string_view path, absl::string_view body,
                                  absl::string_view extra_headers = "");
  absl::StatusOr<HttpAnswer> Get(absl::string_view path, absl::string_view extra_headers = "");
  // True when the server has closed the connection (reads end of stream); waits up to
  // kWaitLimit.
  bool WaitForClose();

 private:
  struct Tls;  // The GnuTLS session and credentials of a TLS connection.

  explicit HttpClient(int socket);
  // Reads more bytes into buffer_; false at end of stream or error.
  bool Fill();

  int socket_ = -1;
  std::unique_ptr<Tls> tls_;
  std::string buffer_;
};

}  // namespace dflash::e2e
