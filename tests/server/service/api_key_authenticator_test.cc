#include "server/service/api_key_authenticator.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/server/scratch_directory.h"

namespace dflash::serving {
namespace {

const std::string kKey = "k3y-0123456789abcdef";
const std::string kOther = "another-key-0123456789";

TEST(ApiKeyAuthenticatorTest, AcceptsBearerAndBareKeys) {
  ApiKeyAuthenticator auth({kKey, kOther}, "authorization");
  const std::string bearer = "Bearer " + kKey;
  const std::string lower_bearer = "bearer " + kOther;
  EXPECT_TRUE(auth.Check(&bearer).ok());
  EXPECT_TRUE(auth.Check(&lower_bearer).ok());
  EXPECT_TRUE(auth.Check(&kKey).ok());
}

TEST(ApiKeyAuthenticatorTest, RejectsMissingWrongAndPrefixKeys) {
  ApiKeyAuthenticator auth({kKey}, "authorization");
  const std::string wrong = "Bearer " + kOther;
  const std::string prefix = kKey.substr(0, kKey.size() - 1);
  const std::string longer = kKey + "x";
  const std::string empty;
  EXPECT_EQ(auth.Check(nullptr).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.Check(&empty).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.Check(&wrong).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.Check(&prefix).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.Check(&longer).code(), absl::StatusCode::kUnauthenticated);
  // The message never echoes what was presented.
  EXPECT_EQ(auth.Check(&wrong).message().find(kOther), absl::string_view::npos);
}

TEST(ApiKeyAuthenticatorTest, HeaderIsLowerCased) {
  ApiKeyAuthenticator auth({kKey}, "X-Api-Key");
  EXPECT_EQ(auth.header(), "x-api-key");
}

TEST(ApiKeyAuthenticatorTest, FromConfigIsNullWithoutKeysAndReadsTheKeysFile) {
  absl::StatusOr<std::unique_ptr<ApiKeyAuthenticator>> none =
      ApiKeyAuthenticator::FromConfig(AuthConfig{});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);

  ScratchDirectory dir;
  const std::filesystem::path file = dir.path() / "keys.txt";
  std::ofstream(file) << "# service keys\n\n" << kKey << "\n";
  AuthConfig auth;
  auth.api_keys_file = file.string();
  absl::StatusOr<std::unique_ptr<ApiKeyAuthenticator>> from_file =
      ApiKeyAuthenticator::FromConfig(auth);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  ASSERT_NE(*from_file, nullptr);
  EXPECT_TRUE((*from_file)->Check(&kKey).ok());
  EXPECT_FALSE((*from_file)->Check(&kOther).ok());
}

}  // namespace
}  // namespace dflash::serving
