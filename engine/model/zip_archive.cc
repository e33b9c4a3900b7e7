#include "engine/model/zip_archive.h"

#include <unzip.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace dflash {

struct ZipSource {
  absl::string_view bytes;
  uint64_t position = 0;
  std::string name;
};

namespace {

// Longest entry name accepted; PyTorch's are "<archive>/data/<n>" and similar.
constexpr size_t kMaxEntryNameBytes = 4096;
// Deflate cannot expand data by more than about 1032:1; an entry claiming more is corrupt, and
// refusing it keeps a small hostile file from making the reader allocate gigabytes.
constexpr uint64_t kMaxDeflateRatio = 1032;

using Source = ZipSource;

voidpf OpenSource(voidpf opaque, const void* /*filename*/, int /*mode*/) { return opaque; }

uLong ReadSource(voidpf /*opaque*/, voidpf stream, void* buffer, uLong size) {
  auto* source = static_cast<Source*>(stream);
  const uint64_t available = source->bytes.size() - source->position;
  const uint64_t count = std::min<uint64_t>(size, available);
  if (count > 0) std::memcpy(buffer, source->bytes.data() + source->position, count);
  source->position += count;
  return static_cast<uLong>(count);
}

uLong WriteSource(voidpf, voidpf, const void*, uLong) { return 0; }

ZPOS64_T TellSource(voidpf /*opaque*/, voidpf stream) {
  return static_cast<Source*>(stream)->position;
}

long SeekSource(voidpf /*opaque*/, voidpf stream, ZPOS64_T offset, int origin) {
  auto* source = static_cast<Source*>(stream);
  uint64_t base = 0;
  switch (origin) {
    case ZLIB_FILEFUNC_SEEK_SET:
      base = 0;
      break;
    case ZLIB_FILEFUNC_SEEK_CUR:
      base = source->position;
      break;
    case ZLIB_FILEFUNC_SEEK_END:
      base = source->bytes.size();
      break;
    default:
      return -1;
  }
  if (offset > source->bytes.size() - base) return -1;
  source->position = base + offset;
  return 0;
}

int CloseSource(voidpf, voidpf) { return 0; }
int SourceError(voidpf, voidpf) { return 0; }

uint32_t Crc32(absl::string_view bytes) {
  return static_cast<uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

// True when the last bytes of `bytes` are an end of central directory record (22 bytes and a
// comment of the length it declares).
bool EndsWithEndRecord(absl::string_view bytes) {
  constexpr size_t kEndRecordBytes = 22;
  if (bytes.size() < kEndRecordBytes) return false;
  const size_t lowest =
      bytes.size() > kEndRecordBytes + 0xffff ? bytes.size() - kEndRecordBytes - 0xffff : 0;
  for (size_t at = bytes.size() - kEndRecordBytes + 1; at-- > lowest;) {
    if (bytes.substr(at, 4) != "PK\x05\x06") continue;
    const size_t comment = static_cast<uint8_t>(bytes[at + 20]) |
                           (static_cast<size_t>(static_cast<uint8_t>(bytes[at + 21])) << 8);
    if (at + kEndRecordBytes + comment == bytes.size()) return true;
  }
  return false;
}

}  // namespace

ZipArchive::ZipArchive(std::unique_ptr<ZipSource> source, void* handle)
    : source_(std::move(source)), handle_(handle) {}

ZipArchive::~ZipArchive() { unzClose(static_cast<unzFile>(handle_)); }

absl::StatusOr<std::unique_ptr<ZipArchive>> ZipArchive::Open(absl::string_view bytes,
                                                             std::string source_name) {
  // minizip accepts an archive whose zip64 records are intact but whose final end record is cut
  // off; a complete end record is required here so that every truncation is reported.
  if (!EndsWithEndRecord(bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name,
                     ": not a zip archive, or a truncated one (no end of central directory "
                     "record at its end)"));
  }
  auto source = std::make_unique<ZipSource>();
  source->bytes = bytes;
  source->name = std::move(source_name);
  zlib_filefunc64_def functions{};
  functions.zopen64_file = OpenSource;
  functions.zread_file = ReadSource;
  functions.zwrite_file = WriteSource;
  functions.ztell64_file = TellSource;
  functions.zseek64_file = SeekSource;
  functions.zclose_file = CloseSource;
  functions.zerror_file = SourceError;
  functions.opaque = source.get();
  unzFile handle = unzOpen2_64(source->name.c_str(), &functions);
  if (handle == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(source->name,
                     ": not a zip archive (no valid end of central directory; "
                     "truncated or corrupt file?)"));
  }
  const std::string name = source->name;
  std::unique_ptr<ZipArchive> archive(new ZipArchive(std::move(source), handle));

  unz_global_info64 global{};
  if (unzGetGlobalInfo64(handle, &global) != UNZ_OK) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": unreadable zip directory"));
  }
  std::set<std::string> names;
  int rc = global.number_entry == 0 ? UNZ_END_OF_LIST_OF_FILE : unzGoToFirstFile(handle);
  for (; rc == UNZ_OK; rc = unzGoToNextFile(handle)) {
    unz_file_info64 info{};
    std::string entry_name(kMaxEntryNameBytes, '\0');
    if (unzGetCurrentFileInfo64(handle, &info, entry_name.data(), entry_name.size(), nullptr, 0,
                                nullptr, 0) != UNZ_OK) {
      break;
    }
    if (info.size_filename > kMaxEntryNameBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": zip entry name of ", info.size_filename,
                       " bytes exceeds the limit of ", kMaxEntryNameBytes));
    }
    entry_name.resize(info.size_filename);
    ZipEntry entry;
    entry.name = std::move(entry_name);
    entry.method = static_cast<uint16_t>(info.compression_method);
    entry.compressed_size = info.compressed_size;
    entry.size = info.uncompressed_size;
    entry.crc32 = static_cast<uint32_t>(info.crc);
    entry.directory_offset = unzGetOffset64(handle);
    if ((info.flag & 1) != 0) return archive->EntryError(entry, "is encrypted");
    if (entry.size > kMaxZipEntryBytes) {
      return archive->EntryError(
          entry,
          absl::StrCat("declares ", entry.size, " bytes, over the limit of ", kMaxZipEntryBytes));
    }
    if (!names.insert(entry.name).second) return archive->EntryError(entry, "appears twice");
    archive->entries_.push_back(std::move(entry));
  }
  if (rc != UNZ_END_OF_LIST_OF_FILE) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": corrupt zip central directory after ",
                                                   archive->entries_.size(), " of ",
                                                   global.number_entry, " entries"));
  }
  return archive;
}

const ZipEntry* ZipArchive::Find(absl::string_view name) const {
  for (const ZipEntry& entry : entries_) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

absl::Status ZipArchive::EntryError(const ZipEntry& entry, absl::string_view problem) const {
  return absl::InvalidArgumentError(
      absl::StrCat(source_->name, ": zip entry '", absl::CHexEscape(entry.name), "' ", problem));
}

absl::StatusOr<absl::string_view> ZipArchive::Read(const ZipEntry& entry) {
  if (entry.method == Z_DEFLATED) return Inflate(entry);
  if (entry.method != 0) {
    return EntryError(entry, absl::StrCat("uses compression method ", entry.method,
                                          "; only stored (0) and deflated (8) are supported"));
  }
  if (entry.compressed_size != entry.size) {
    return EntryError(entry, absl::StrCat("is stored but its sizes differ (", entry.size, " and ",
                                          entry.compressed_size, " bytes)"));
  }
  auto handle = static_cast<unzFile>(handle_);
  // Opening the entry raw makes minizip check its local header against the directory and
  // locate its data, which is then read in place.
  int method = 0;
  int level = 0;
  if (unzSetOffset64(handle, entry.directory_offset) != UNZ_OK ||
      unzOpenCurrentFile2(handle, &method, &level, /*raw=*/1) != UNZ_OK) {
    return EntryError(entry, "has a corrupt local header");
  }
  const uint64_t begin = unzGetCurrentFileZStreamPos64(handle);
  unzCloseCurrentFile(handle);
  const uint64_t file_size = source_->bytes.size();
  if (begin > file_size || entry.size > file_size - begin) {
    return EntryError(entry, absl::StrCat("runs past the end of the ", file_size,
                                          "-byte file (truncated download?)"));
  }
  const absl::string_view data = source_->bytes.substr(begin, entry.size);
  if (Crc32(data) != entry.crc32) return EntryError(entry, "fails its CRC-32 check (corrupt file)");
  return data;
}

absl::StatusOr<absl::string_view> ZipArchive::Inflate(const ZipEntry& entry) {
  if (entry.compressed_size > source_->bytes.size()) {
    return EntryError(entry, absl::StrCat("declares ", entry.compressed_size,
                                          " compressed bytes, more than the whole file"));
  }
  if (entry.size / kMaxDeflateRatio > entry.compressed_size) {
    return EntryError(entry, absl::StrCat("claims to inflate ", entry.compressed_size, " bytes to ",
                                          entry.size, ", more than deflate can"));
  }
  auto handle = static_cast<unzFile>(handle_);
  if (unzSetOffset64(handle, entry.directory_offset) != UNZ_OK ||
      unzOpenCurrentFile(handle) != UNZ_OK) {
    return EntryError(entry, "has a corrupt local header");
  }
  auto buffer = std::make_unique<std::string>(entry.size, '\0');
  uint64_t filled = 0;
  while (true) {
    // Once the declared size is filled, one more byte is requested so that an entry longer than
    // its size shows.
    const uint64_t remaining = entry.size - filled;
    char probe = 0;
    char* target = remaining > 0 ? buffer->data() + filled : &probe;
    const auto want = static_cast<unsigned>(
        std::min<uint64_t>(std::max<uint64_t>(remaining, 1), uint64_t{1} << 30));
    const int count = unzReadCurrentFile(handle, target, want);
    if (count < 0) {
      unzCloseCurrentFile(handle);
      return EntryError(entry, absl::StrCat("does not inflate (zlib error ", count, ")"));
    }
    if (count == 0) break;
    if (remaining == 0) {
      unzCloseCurrentFile(handle);
      return EntryError(entry, absl::StrCat("inflates past its declared ", entry.size, " bytes"));
    }
    filled += static_cast<uint64_t>(count);
  }
  unzCloseCurrentFile(handle);
  if (filled != entry.size) {
    return EntryError(entry, absl::StrCat("inflates to ", filled, " bytes, not the declared ",
                                          entry.size, " (truncated?)"));
  }
  if (Crc32(*buffer) != entry.crc32) {
    return EntryError(entry, "fails its CRC-32 check (corrupt file)");
  }
  inflated_.push_back(std::move(buffer));
  return absl::string_view(*inflated_.back());
}

}  // namespace dflash
