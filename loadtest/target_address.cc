#include "loadtest/target_address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace dflash::loadtest {
namespace {

absl::Status NotLoopback(absl::string_view target, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--target '", target, "' refused (", why,
      "): dflash-loadtest only targets this machine: localhost:PORT, 127.0.0.0/8:PORT, "
      "[::1]:PORT or a unix: socket"));
}

bool IsLoopbackHost(absl::string_view host) {
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  const std::string text(host);
  std::array<uint8_t, 16> bytes{};
  if (inet_pton(AF_INET, text.c_str(), bytes.data()) == 1) return bytes[0] == 127;
  if (inet_pton(AF_INET6, text.c_str(), bytes.data()) == 1) {
    static constexpr std::array<uint8_t, 16> kLoopback6 = {0, 0, 0, 0, 0, 0, 0, 0,
                                                           0, 0, 0, 0, 0, 0, 0, 1};
    static constexpr std::array<uint8_t, 12> kV4MappedPrefix = {0, 0, 0, 0, 0,    0,
                                                                0, 0, 0, 0, 0xff, 0xff};
    if (bytes == kLoopback6) return true;
    return std::memcmp(bytes.data(), kV4MappedPrefix.data(), kV4MappedPrefix.size()) == 0 &&
           bytes[12] == 127;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::string> CheckLoopbackTarget(absl::string_view target) {
  if (target.empty()) return NotLoopback(target, "empty");
  absl::string_view rest = target;
  // Local sockets never leave the machine.
  for (absl::string_view scheme : {"unix:", "unix-abstract:"}) {
    if (absl::StartsWith(rest, scheme)) {
      if (rest.size() == scheme.size()) return NotLoopback(target, "no socket path");
      return std::string(target);
    }
  }
  if (absl::StrContains(rest, ',')) return NotLoopback(target, "address lists are not accepted");
  if (absl::ConsumePrefix(&rest, "dns:")) {
    // dns://AUTHORITY/host names a DNS server to ask, which would be a remote machine.
    if (absl::ConsumePrefix(&rest, "//") && !absl::ConsumePrefix(&rest, "/")) {
      return NotLoopback(target, "a DNS server authority is not accepted");
    }
  } else if (!absl::ConsumePrefix(&rest, "ipv4:")) {
    absl::ConsumePrefix(&rest, "ipv6:");
  }
  absl::string_view host;
  absl::string_view port;
  if (absl::ConsumePrefix(&rest, "[")) {
    const size_t close = rest.find(']');
    if (close == absl::string_view::npos) return NotLoopback(target, "unclosed '['");
    host = rest.substr(0, close);
    rest.remove_prefix(close + 1);
    if (!absl::ConsumePrefix(&rest, ":")) return NotLoopback(target, "no port");
    port = rest;
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == absl::string_view::npos) return NotLoopback(target, "no port");
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (absl::StrContains(host, ':')) {
      return NotLoopback(target, "an IPv6 address needs brackets, as in [::1]:PORT");
    }
  }
  uint32_t port_number = 0;
  if (port.empty() ||
      !std::all_of(port.begin(), port.end(), [](char c) { return absl::ascii_isdigit(c); }) ||
      !absl::SimpleAtoi(port, &port_number) || port_number == 0 || port_number > 65535) {
    return NotLoopback(target, absl::StrCat("bad port '", port, "'"));
  }
  if (!IsLoopbackHost(host)) {
    return NotLoopback(target, absl::StrCat("host '", host, "' is not a loopback address"));
  }
  return std::string(target);
}

}  // namespace dflash::loadtest
