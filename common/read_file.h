// Whole-file reads for small text files (configs, tokenizer metadata).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "absl/status/statusor.h"

namespace dflash {

// Reads `path` into memory. NOT_FOUND names a missing file; files larger than `max_bytes` are
// refused with INVALID_ARGUMENT so that a wrong path cannot pull gigabytes into a string.
absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path,
                                     size_t max_bytes = size_t{64} << 20);

}  // namespace dflash
