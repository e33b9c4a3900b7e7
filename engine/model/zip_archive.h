// Reading a zip archive held in memory (a mapped file), as PyTorch's checkpoints are: the
// directory and the local headers are parsed by minizip (zlib's contrib/minizip, the Debian
// package libminizip-dev); stored entries are returned in place, deflated ones are inflated into
// memory the archive owns. Every entry's CRC-32 is checked when it is read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dflash {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflated; others are refused when read.
  uint64_t compressed_size = 0;
  uint64_t size = 0;
  uint32_t crc32 = 0;
  uint64_t directory_offset = 0;  // Where minizip finds the entry again (unzSetOffset64).
};

// Entries whose declared size exceeds this are refused: no tensor of a supported model comes
// close, and it bounds what a hostile directory can make the reader allocate.
inline constexpr uint64_t kMaxZipEntryBytes = uint64_t{1} << 40;

// The bytes minizip reads, through callbacks, and its read position.
struct ZipSource;

class ZipArchive {
 public:
  // Reads the central directory of `bytes`, which must outlive the archive. `source` names the
  // file in errors. Duplicate entry names and entries whose data lies outside `bytes` are errors.
  static absl::StatusOr<std::unique_ptr<ZipArchive>> Open(absl::string_view bytes,
                                                          std::string source);
  ~ZipArchive();
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;

  // In directory order.
  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* Find(absl::string_view name) const;

  // The content of `entry` after its CRC-32 is checked: a view into the archive's bytes for a
  // stored entry, into a buffer the archive keeps for a deflated one. Not thread-safe.
  absl::StatusOr<absl::string_view> Read(const ZipEntry& entry);

 private:
  ZipArchive(std::unique_ptr<ZipSource> source, void* handle);

  absl::Status EntryError(const ZipEntry& entry, absl::string_view problem) const;
  absl::StatusOr<absl::string_view> Inflate(const ZipEntry& entry);

  std::unique_ptr<ZipSource> source_;
  void* handle_;  // unzFile.
  std::vector<ZipEntry> entries_;
  std::vector<std::unique_ptr<std::string>> inflated_;
};

}  // namespace dflash
