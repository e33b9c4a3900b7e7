// Where `auto` tuning looks for profiles, one rule for every binary (dflash-server,
// dflash-bench-engine, tests): $DFLASH_PROFILES_DIR when set; else config/profiles beside the
// running binary's prefix (<prefix>/bin/../config/profiles: the Docker image's layout), or one
// level further up (a build tree's <source>/build/bin); else the source tree's config/profiles. So
// a binary finds the profiles wherever it is started from, never relative to the working directory.
#pragma once

#include <filesystem>

namespace dflash::tuning {

std::filesystem::path DefaultProfilesDirectory();

}  // namespace dflash::tuning
