#include "loadtest/target_address.h"

#include <gtest/gtest.h>

#include <string>

namespace dflash::loadtest {
namespace {

TEST(TargetAddressTest, AcceptsLoopbackTargets) {
  for (const std::string target :
       {"localhost:50051", "LOCALHOST:1", "127.0.0.1:50051", "127.1.2.3:65535",
        "127.255.255.255:8080", "[::1]:50051", "[::ffff:127.0.0.1]:50051", "ipv4:127.0.0.1:50051",
        "ipv6:[::1]:50051", "dns:///localhost:50051", "dns:localhost:50051",
        "unix:/tmp/dflash.sock", "unix:///tmp/dflash.sock", "unix:relative.sock",
        "unix-abstract:dflash"}) {
    const auto checked = CheckLoopbackTarget(target);
    ASSERT_TRUE(checked.ok()) << target << ": " << checked.status();
    EXPECT_EQ(*checked, target);
  }
}

TEST(TargetAddressTest, RejectsEverythingElse) {
  for (const std::string target : {"",
                                   "example.com:443",
                                   "10.0.0.1:50051",
                                   "192.168.1.10:50051",
                                   "0.0.0.0:50051",
                                   "128.0.0.1:50051",
                                   "[::]:50051",
                                   "[2001:db8::1]:50051",
                                   "[::ffff:10.0.0.1]:50051",
                                   "127.0.0.1.example.com:50051",
                                   "localhost.example.com:50051",
                                   "localhost",
                                   "127.0.0.1",
                                   "127.0.0.1:",
                                   "127.0.0.1:0",
                                   "127.0.0.1:65536",
                                   "127.0.0.1:80a",
                                   "127.0.0.1:-1",
                                   "::1:50051",
                                   "[::1]50051",
                                   "[::1",
                                   "ipv4:127.0.0.1:1,10.0.0.1:2",
                                   "dns://8.8.8.8/localhost:50051",
                                   "dns://10.0.0.1/127.0.0.1:50051",
                                   "unix:",
                                   "xds:///localhost:50051",
                                   "127.1:50051",
                                   " localhost:50051"}) {
    const auto checked = CheckLoopbackTarget(target);
    ASSERT_FALSE(checked.ok()) << "'" << target << "' was accepted";
    EXPECT_EQ(checked.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(checked.status().message().find("only targets this machine"), std::string::npos)
        << checked.status();
  }
}

}  // namespace
}  // namespace dflash::loadtest
