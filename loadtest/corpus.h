// The English text that generated requests are cut from. Requests are made of consecutive words
// of a local file (by default config/demo/corpus.txt, committed in the repository), never of
// downloaded data, so a run needs nothing but the checkout.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/random.h"

namespace dflash::loadtest {

class Corpus {
 public:
  // Splits `text` on whitespace. INVALID_ARGUMENT (naming `source`) when it holds no word.
  static absl::StatusOr<Corpus> FromText(absl::string_view text, absl::string_view source);
  static absl::StatusOr<Corpus> Load(const std::string& path);

  size_t word_count() const { return words_.size(); }

  // `count` consecutive words from word `start`, wrapping around at the end, joined by single
  // spaces ("" for count 0).
  std::string Window(size_t start, size_t count) const;
  // A window at a start drawn from `rng`.
  std::string RandomWindow(Rng& rng, size_t count) const;

 private:
  explicit Corpus(std::vector<std::string> words) : words_(std::move(words)) {}

  std::vector<std::string> words_;
};

// The corpus used when --corpus is not given: config/demo/corpus.txt under the working directory
// (the repository root) when it exists there, else the same file in the source tree this binary
// was built from.
std::string DefaultCorpusPath();

}  // namespace dflash::loadtest
