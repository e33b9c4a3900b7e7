// Token classification results as users see them: per-token labels, or entity groups built from
// them with the aggregation strategies of transformers' TokenClassificationPipeline (none, simple,
// first, average, max), with its word-boundary heuristic for tokenizers that do not mark word
// continuations (sentencepiece), its B-/I- grouping and its ignore_labels filter.
//
// Pure functions of the model's per-token label probabilities and the tokenizer's pieces and byte
// spans; no model or tokenizer is needed.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace dflash {

enum class AggregationStrategy {
  kNone,     // One entity per token.
  kSimple,   // Adjacent tokens with the same tag grouped (B- starts a new group).
  kFirst,    // Words first: a word takes the label of its first token; then grouped.
  kAverage,  // Words first: a word takes the label of its tokens' mean probabilities.
  kMax,      // Words first: a word takes the label of its most confident token.
};
absl::string_view AggregationStrategyName(AggregationStrategy strategy);  // "none", "simple", ...

// One content token of a text (special tokens are left out by the caller).
struct ScoredToken {
  int index = 0;                     // Position in the model sequence ([CLS] is 0).
  std::string piece;                 // The vocabulary piece, e.g. "▁Paris" or "is".
  bool unknown = false;              // The unknown-token id: shown as the text it covers.
  uint32_t begin = 0;                // UTF-8 byte span [begin, end) in the text; the tokenizer's
  uint32_t end = 0;                  // span, so the space before a word belongs to its first token.
  std::vector<float> probabilities;  // Softmax of the token's logits, one per label.
};

// A labelled token (kNone) or an entity group (the other strategies).
struct TokenEntity {
  // kNone: the token's label name. Otherwise the group's entity: the label of its first member
  // after the first "-" ("B-PER" -> "PER", "O" -> "O").
  std::string label;
  int label_id = -1;  // kNone: the token's label id; -1 for groups.
  float score = 0;    // kNone: the label's probability; groups: the mean of their members' scores.
  // kNone: the piece ("▁Paris"); groups: their pieces joined as text ("Paris France").
  std::string word;
  uint32_t begin = 0;  // UTF-8 bytes: the first member's begin and the last member's end.
  uint32_t end = 0;
  int token_index = -1;  // kNone: ScoredToken::index; -1 for groups.
};

// Whether the token starting at byte `begin` of `text` continues the previous token's word: the
// pipeline's fallback for tokenizers without a continuing-subword prefix, which calls a token a
// continuation when it does not start the text and neither the character before it nor its first
// character is an ASCII space.
bool ContinuesWord(absl::string_view text, uint32_t begin);

// Pieces joined as text, as a sentencepiece (Metaspace) decoder joins them: "▁" becomes a space,
// except in the first piece, where it is dropped.
std::string JoinPieces(std::span<const std::string> pieces);

// The entities of one text, in text order, without those whose label (kNone) or entity (groups)
// is in `ignore_labels`. `tokens` are the text's content tokens in model order; each has one
// probability per entry of `labels` (id2label).
std::vector<TokenEntity> AggregateTokens(absl::string_view text,
                                         std::span<const ScoredToken> tokens,
                                         std::span<const std::string> labels,
                                         AggregationStrategy strategy,
                                         std::span<const std::string> ignore_labels);

}  // namespace dflash
