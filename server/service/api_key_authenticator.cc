#include "server/service/api_key_authenticator.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace dflash::serving {

absl::StatusOr<std::unique_ptr<ApiKeyAuthenticator>> ApiKeyAuthenticator::FromConfig(
    const AuthConfig& auth) {
  std::vector<std::string> keys = auth.api_keys;
  if (!auth.api_keys_file.empty()) {
    DFLASH_ASSIGN_OR_RETURN(std::vector<std::string> from_file,
                            ReadApiKeysFile(auth.api_keys_file));
    keys.insert(keys.end(), from_file.begin(), from_file.end());
  }
  if (keys.empty()) return std::unique_ptr<ApiKeyAuthenticator>();
  return std::make_unique<ApiKeyAuthenticator>(std::move(keys), auth.header);
}

ApiKeyAuthenticator::ApiKeyAuthenticator(std::vector<std::string> keys, std::string header)
    : header_(absl::AsciiStrToLower(header.empty() ? "authorization" : header)) {
  keys_.reserve(keys.size());
  for (const std::string& key : keys) keys_.push_back(Hash(key));
}

ApiKeyAuthenticator::Digest ApiKeyAuthenticator::Hash(absl::string_view key) {
  Digest digest;
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest.data());
  return digest;
}

absl::Status ApiKeyAuthenticator::Check(const std::string* presented) const {
  if (presented == nullptr || presented->empty()) {
    return absl::UnauthenticatedError(absl::StrCat("missing API key: send it in the '", header_,
                                                   "' metadata as \"Bearer <key>\""));
  }
  absl::string_view key = *presented;
  if (absl::StartsWithIgnoreCase(key, "bearer ")) key.remove_prefix(7);
  const Digest digest = Hash(absl::StripAsciiWhitespace(key));
  // Every key is compared, match or not, so the time taken does not depend on which key matched.
  bool match = false;
  for (const Digest& known : keys_) {
    match |= CRYPTO_memcmp(known.data(), digest.data(), digest.size()) == 0;
  }
  if (!match) return absl::UnauthenticatedError("invalid API key");
  return absl::OkStatus();
}

}  // namespace dflash::serving
