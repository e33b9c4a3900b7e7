// libFuzzer target: arbitrary bytes as tokenizer.json. JsonTokenizer::FromJson must never crash,
// throw or hang; a refusal is INVALID_ARGUMENT or FAILED_PRECONDITION. An accepted tokenizer
// then encodes fixed texts and the input's own bytes (as text, when they are UTF-8): every
// encoding must be well formed (ids inside the vocabulary, offsets inside their text, the
// template's type ids), and Encode must equal EncodeText + Assemble. Violations abort.
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "common/logging.h"
#include "server/tokenizer/tokenizer_json/json_tokenizer.h"
#include "server/tokenizer/unicode_text.h"

namespace {

[[noreturn]] void Violation(const char* what) {
  std::fprintf(stderr, "tokenizer_json_fuzz: invariant violated: %s\n", what);
  std::abort();
}

void CheckEncoding(const dflash::Tokenizer& tokenizer, const dflash::Encoding& encoding,
                   absl::string_view text, std::optional<absl::string_view> pair) {
  const size_t n = encoding.ids.size();
  if (encoding.token_type_ids.size() != n || encoding.offsets.size() != n ||
      encoding.sources.size() != n || encoding.special_tokens_mask.size() != n) {
    Violation("array sizes differ");
  }
  for (size_t i = 0; i < n; ++i) {
    if (encoding.ids[i] < 0 || encoding.ids[i] >= tokenizer.vocab_size()) {
      Violation("id outside the vocabulary");
    }
    const dflash::ByteSpan span = encoding.offsets[i];
    if (span.begin > span.end) Violation("offset begins after its end");
    switch (encoding.sources[i]) {
      case dflash::TokenSource::kTemplate:
        if (span.begin != 0 || span.end != 0) Violation("template token with an offset");
        break;
      case dflash::TokenSource::kFirst:
        if (span.end > text.size()) Violation("offset past the first text");
        break;
      case dflash::TokenSource::kSecond:
        if (!pair.has_value() || span.end > pair->size()) Violation("offset past the second text");
        break;
    }
  }
}

void Exercise(const dflash::Tokenizer& tokenizer, absl::string_view text,
              std::optional<absl::string_view> pair) {
  dflash::TruncationOptions truncation;
  truncation.strategy = dflash::TruncationStrategy::kLongestFirst;
  truncation.max_length = 16;
  const absl::StatusOr<dflash::Encoding> encoding = tokenizer.Encode(text, pair, truncation);
  if (!encoding.ok()) {
    const absl::StatusCode code = encoding.status().code();
    if (code != absl::StatusCode::kInvalidArgument) Violation("unexpected encode error code");
    return;
  }
  CheckEncoding(tokenizer, *encoding, text, pair);
  const absl::StatusOr<dflash::TextTokens> first = tokenizer.EncodeText(text);
  if (!first.ok()) Violation("EncodeText fails where Encode succeeds");
  std::optional<dflash::TextTokens> second;
  if (pair.has_value()) {
    absl::StatusOr<dflash::TextTokens> tokens = tokenizer.EncodeText(*pair);
    if (!tokens.ok()) Violation("EncodeText fails on the pair");
    second = *std::move(tokens);
  }
  const absl::StatusOr<dflash::Encoding> assembled =
      tokenizer.Assemble(*first, second.has_value() ? &*second : nullptr, truncation);
  if (!assembled.ok() || assembled->ids != encoding->ids ||
      assembled->offsets != encoding->offsets ||
      assembled->token_type_ids != encoding->token_type_ids) {
    Violation("Encode differs from EncodeText + Assemble");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    dflash::Log().set_level(spdlog::level::off);
    return true;
  }();
  (void)quiet;
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  // Small bounds keep each run fast; the bounds themselves are what a hostile file meets.
  dflash::TokenizerJsonLimits limits;
  limits.max_file_bytes = size_t{4} << 20;
  limits.max_pieces = 1 << 14;
  limits.max_added_tokens = 1 << 10;
  dflash::TokenizerOptions options;
  options.max_input_bytes = 1 << 12;
  try {
    absl::StatusOr<std::unique_ptr<dflash::JsonTokenizer>> tokenizer =
        dflash::JsonTokenizer::FromJson(json, dflash::TokenizerConfig(), options, limits);
    if (!tokenizer.ok()) {
      const absl::StatusCode code = tokenizer.status().code();
      if (code != absl::StatusCode::kInvalidArgument &&
          code != absl::StatusCode::kFailedPrecondition) {
        std::fprintf(stderr, "tokenizer_json_fuzz: unexpected error: %s\n",
                     tokenizer.status().ToString().c_str());
        std::abort();
      }
      return 0;
    }
    static constexpr const char* kTexts[] = {
        "",
        " ",
        "Hello world",
        "  two  spaces\tand\nnewlines  ",
        "[CLS] [SEP] [MASK] [UNK] <s> </s>",
        "caf\xC3\xA9 cafe\xCC\x81 \xEF\xAC\x81"
        "nance \xEF\xBC\xA1\xEF\xBC\xA2",
        "\xE6\xBC\xA2\xE5\xAD\x97 \xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xF0\x9F\x98\x80",
        "a,b.c!d?\xE2\x80\x94"
        "e",
    };
    for (const char* text : kTexts) Exercise(**tokenizer, text, std::nullopt);
    Exercise(**tokenizer, kTexts[2], kTexts[5]);
    const absl::string_view tail = json.substr(json.size() > 256 ? json.size() - 256 : 0);
    if (dflash::ValidateUtf8(tail, "tail").ok()) {
      Exercise(**tokenizer, tail, std::nullopt);
      Exercise(**tokenizer, kTexts[4], tail);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tokenizer_json_fuzz: exception escaped: %s\n", error.what());
    std::abort();
  }
  return 0;
}
