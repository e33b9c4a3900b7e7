#include "tests/e2e/http_client.h"

#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/e2e/e2e_harness.h"

namespace dflash::e2e {

struct HttpClient::Tls {
  gnutls_certificate_credentials_t credentials = nullptr;
  gnutls_session_t session = nullptr;
  ~Tls() {
    if (session != nullptr) {
      gnutls_bye(session, GNUTLS_SHUT_WR);
      gnutls_deinit(session);
    }
    if (credentials != nullptr) gnutls_certificate_free_credentials(credentials);
  }
};

HttpClient::HttpClient(int socket) : socket_(socket) {}

absl::StatusOr<HttpClient> HttpClient::ConnectTls(int port, const TlsClientFiles& files) {
  absl::StatusOr<HttpClient> client = Connect(port);
  if (!client.ok()) return client.status();
  auto tls = std::make_unique<Tls>();
  const auto failed = [](absl::string_view what, int code) {
    return absl::UnavailableError(absl::StrCat(what, ": ", gnutls_strerror(code)));
  };
  int code = gnutls_certificate_allocate_credentials(&tls->credentials);
  if (code < 0) return failed("credentials", code);
  if (gnutls_certificate_set_x509_trust_file(tls->credentials, files.ca_file.c_str(),
                                             GNUTLS_X509_FMT_PEM) <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("no CA certificate in ", files.ca_file));
  }
  if (!files.cert_file.empty()) {
    code = gnutls_certificate_set_x509_key_file(tls->credentials, files.cert_file.c_str(),
                                                files.key_file.c_str(), GNUTLS_X509_FMT_PEM);
    if (code < 0) return failed(files.cert_file, code);
  }
  if ((code = gnutls_init(&tls->session, GNUTLS_CLIENT)) < 0) return failed("init", code);
  gnutls_set_default_priority(tls->session);
  gnutls_credentials_set(tls->session, GNUTLS_CRD_CERTIFICATE, tls->credentials);
  gnutls_server_name_set(tls->session, GNUTLS_NAME_DNS, "localhost", 9);
  gnutls_session_set_verify_cert(tls->session, "localhost", 0);
  gnutls_transport_set_int(tls->session, client->socket_);
  gnutls_handshake_set_timeout(tls->session,
                               static_cast<unsigned int>(absl::ToInt64Milliseconds(kWaitLimit)));
  do {
    code = gnutls_handshake(tls->session);
  } while (code < 0 && gnutls_error_is_fatal(code) == 0);
  if (code < 0) return failed("TLS handshake", code);
  client->tls_ = std::move(tls);
  return client;
}

absl::StatusOr<HttpClient> HttpClient::Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to port ", port));
  }
  return HttpClient(fd);
}

HttpClient::HttpClient(HttpClient&& other) noexcept
    : socket_(other.socket_), tls_(std::move(other.tls_)), buffer_(std::move(other.buffer_)) {
  other.socket_ = -1;
}

HttpClient::~HttpClient() {
  tls_.reset();  // Its close notify goes out before the socket closes.
  if (socket_ >= 0) close(socket_);
}

absl::Status HttpClient::SendRaw(absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = tls_ != nullptr
                             ? gnutls_record_send(tls_->session, bytes.data(), bytes.size())
                             : send(socket_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent <= 0) return absl::UnavailableError("send failed (connection closed?)");
    bytes.remove_prefix(static_cast<size_t>(sent));
  }
  return absl::OkStatus();
}

bool HttpClient::Fill() {
  // Records GnuTLS has already decrypted are not on the socket any more.
  const bool pending = tls_ != nullptr && gnutls_record_check_pending(tls_->session) > 0;
  pollfd poll_fd{socket_, POLLIN, 0};
  if (!pending && poll(&poll_fd, 1, static_cast<int>(absl::ToInt64Milliseconds(kWaitLimit))) <= 0) {
    return false;
  }
  char chunk[16384];
  const ssize_t received = tls_ != nullptr ? gnutls_record_recv(tls_->session, chunk, sizeof(chunk))
                                           : recv(socket_, chunk, sizeof(chunk), 0);
  if (received <= 0) return false;
  buffer_.append(chunk, static_cast<size_t>(received));
  return true;
}

absl::StatusOr<HttpAnswer> HttpClient::Read() {
  size_t header_end = std::string::npos;
  while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (!Fill()) return absl::UnavailableError("connection closed before a response");
  }
  HttpAnswer answer;
  std::vector<std::string> lines = absl::StrSplit(buffer_.substr(0, header_end), "\r\n");
  buffer_.erase(0, header_end + 4);
  std::vector<std::string> status_line = absl::StrSplit(lines[0], ' ');
  if (status_line.size() < 2 || !absl::SimpleAtoi(status_line[1], &answer.status)) {
    return absl::DataLossError(absl::StrCat("bad status line: ", lines[0]));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    answer.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  if (answer.headers.count("transfer-encoding") > 0) {
    while (true) {
      size_t line_end;
      while ((line_end = buffer_.find("\r\n")) == std::string::npos) {
        if (!Fill()) return absl::DataLossError("truncated chunk");
      }
      size_t size = 0;
      if (!absl::SimpleHexAtoi(buffer_.substr(0, line_end), &size)) {
        return absl::DataLossError("bad chunk size");
      }
      while (buffer_.size() < line_end + 2 + size + 2) {
        if (!Fill()) return absl::DataLossError("truncated chunk");
      }
      answer.body += buffer_.substr(line_end + 2, size);
      buffer_.erase(0, line_end + 2 + size + 2);
      if (size == 0) break;
    }
    return answer;
  }
  size_t length = 0;
  if (auto found = answer.headers.find("content-length"); found != answer.headers.end()) {
    if (!absl::SimpleAtoi(found->second, &length)) return absl::DataLossError("bad length");
  }
  while (buffer_.size() < length) {
    if (!Fill()) return absl::DataLossError("truncated body");
  }
  answer.body = buffer_.substr(0, length);
  buffer_.erase(0, length);
  return answer;
}

absl::StatusOr<HttpAnswer> HttpClient::Post(absl::string_view path, absl::string_view body,
                                            absl::string_view extra_headers) {
  absl::Status sent = SendRaw(absl::StrCat("POST ", path,
                                           " HTTP/1.1\r\nHost: test\r\nContent-Type: "
                                           "application/json\r\nContent-Length: ",
                                           body.size(), "\r\n", extra_headers, "\r\n", body));
  if (!sent.ok()) return sent;
  return Read();
}

absl::StatusOr<HttpAnswer> HttpClient::Get(absl::string_view path,
                                           absl::string_view extra_headers) {
  absl::Status sent =
      SendRaw(absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: test\r\n", extra_headers, "\r\n"));
  if (!sent.ok()) return sent;
  return Read();
}

bool HttpClient::WaitForClose() {
  while (Fill()) {
  }
  pollfd poll_fd{socket_, POLLIN, 0};
  if (poll(&poll_fd, 1, 0) < 0) return false;
  char byte;
  return recv(socket_, &byte, 1, MSG_DONTWAIT) == 0;
}

}  // namespace dflash::e2e
