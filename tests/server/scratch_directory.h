// A fresh directory for one test, deleted with its contents when the object goes away; tests
// write checkpoint-style tokenizer files into it.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace dflash {

// The tokenizer fixture: a 4000-piece sentencepiece model in DeBERTa's id layout.
inline std::filesystem::path FixtureSpmModel() {
  return std::filesystem::path(DFLASH_SOURCE_DIR) / "tests/golden/tokenizer/spm.model";
}

class ScratchDirectory {
 public:
  ScratchDirectory() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            absl::StrCat("dflash-tokenizer-test-", getpid(), "-", counter++);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;

  const std::filesystem::path& path() const { return path_; }

  void Write(absl::string_view name, absl::string_view contents) const {
    std::ofstream out(path_ / std::string(name), std::ios::binary);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    ASSERT_TRUE(out.good()) << "cannot write " << (path_ / std::string(name)).string();
  }

  void CopySpmModel() const {
    std::filesystem::copy_file(FixtureSpmModel(), path_ / "spm.model",
                               std::filesystem::copy_options::overwrite_existing);
  }

 private:
  std::filesystem::path path_;
};

}  // namespace dflash
