#include "engine/tuning/profiles_directory.h"

#include <cstdlib>
#include <system_error>

namespace dflash::tuning {

std::filesystem::path DefaultProfilesDirectory() {
  if (const char* configured = std::getenv("DFLASH_PROFILES_DIR");
      configured != nullptr && *configured != '\0') {
    return configured;
  }
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    const std::filesystem::path prefix = exe.parent_path().parent_path();
    for (const std::filesystem::path& candidate :
         {prefix / "config/profiles", prefix.parent_path() / "config/profiles"}) {
      if (std::filesystem::is_directory(candidate, error)) return candidate;
    }
  }
  return std::filesystem::path(DFLASH_SOURCE_DIR) / "config/profiles";
}

}  // namespace dflash::tuning
