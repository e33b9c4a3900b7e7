// The template that wraps one tokenized text or a pair into model input (the post-processing step
// of a tokenizer): pieces that are special ids or one of the texts, each with its token type id.
// DeBERTa's is [CLS] A [SEP] (types 0) and [CLS] A [SEP] B [SEP] (types 0 0 0 1 1);
// tokenizer.json's TemplateProcessing can describe others.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/tokenizer.h"
#include "server/tokenizer/truncation.h"

namespace dflash {

struct TemplatePiece {
  enum class Kind { kSpecial, kFirst, kSecond };
  Kind kind = Kind::kSpecial;
  std::vector<int32_t> ids;  // kSpecial.
  int32_t type_id = 0;
};

struct EncodingTemplate {
  // Without a post-processor: A with type 0, B with type 1, nothing added.
  std::vector<TemplatePiece> single = {{TemplatePiece::Kind::kFirst, {}, 0}};
  std::vector<TemplatePiece> pair = {{TemplatePiece::Kind::kFirst, {}, 0},
                                     {TemplatePiece::Kind::kSecond, {}, 1}};

  // [CLS] A [SEP] and [CLS] A [SEP] B [SEP], with types 0 up to the first [SEP] and 1 after it.
  static EncodingTemplate ClsSep(int32_t cls_id, int32_t sep_id);

  // Ids the template adds around one text or a pair.
  int64_t AddedTokens(bool is_pair) const;
  // The first and last special ids of the single template ([CLS] and [SEP]), or -1.
  int32_t FirstSpecialId() const;
  int32_t LastSpecialId() const;
};

// Truncates the texts to `truncation`'s budget (ComputeTruncation, less the ids the template adds)
// and lays out the template around what is kept: ids, types, special-token mask, sources and
// offsets. `second` is null for a single text.
absl::StatusOr<Encoding> AssembleEncoding(const EncodingTemplate& layout, const TextTokens& first,
                                          const TextTokens* second,
                                          const TruncationOptions& truncation);

}  // namespace dflash
