#include "common/read_file.h"

#include <fstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dflash {

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path, size_t max_bytes) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    return absl::NotFoundError(absl::StrCat(path.string(), ": no such file"));
  }
  if (!std::filesystem::is_regular_file(path, error)) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not a regular file"));
  }
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error) return absl::InternalError(absl::StrCat(path.string(), ": ", error.message()));
  if (size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": ", size,
                                                   " bytes is larger than the limit of ", max_bytes,
                                                   " bytes for this file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::PermissionDeniedError(absl::StrCat(path.string(), ": cannot be opened"));
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (static_cast<uintmax_t>(in.gcount()) != size) {
    return absl::InternalError(absl::StrCat(path.string(), ": short read"));
  }
  return text;
}

}  // namespace dflash
