#include "loadtest/corpus.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/read_file.h"
#include "common/status_macros.h"

namespace dflash::loadtest {

absl::StatusOr<Corpus> Corpus::FromText(absl::string_view text, absl::string_view source) {
  std::vector<std::string> words =
      absl::StrSplit(text, absl::ByAnyChar(" \t\r\n\f\v"), absl::SkipEmpty());
  if (words.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the corpus holds no words"));
  }
  return Corpus(std::move(words));
}

absl::StatusOr<Corpus> Corpus::Load(const std::string& path) {
  DFLASH_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return FromText(text, path);
}

std::string Corpus::Window(size_t start, size_t count) const {
  std::string text;
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) text += ' ';
    text += words_[(start + i) % words_.size()];
  }
  return text;
}

std::string Corpus::RandomWindow(Rng& rng, size_t count) const {
  const auto start =
      static_cast<size_t>(UniformInt(rng, 0, static_cast<int64_t>(words_.size()) - 1));
  return Window(start, count);
}

std::string DefaultCorpusPath() {
  const std::string relative = "config/demo/corpus.txt";
  std::error_code error;
  if (std::filesystem::exists(relative, error)) return relative;
  return absl::StrCat(DFLASH_LOADTEST_SOURCE_DIR, "/", relative);
}

}  // namespace dflash::loadtest
