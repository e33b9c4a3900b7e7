#include "server/tokenizer/encoding_template.h"

#include <optional>

#include "common/status_macros.h"

namespace dflash {

EncodingTemplate EncodingTemplate::ClsSep(int32_t cls_id, int32_t sep_id) {
  using Kind = TemplatePiece::Kind;
  EncodingTemplate layout;
  layout.single = {
      {Kind::kSpecial, {cls_id}, 0}, {Kind::kFirst, {}, 0}, {Kind::kSpecial, {sep_id}, 0}};
  layout.pair = {{Kind::kSpecial, {cls_id}, 0},
                 {Kind::kFirst, {}, 0},
                 {Kind::kSpecial, {sep_id}, 0},
                 {Kind::kSecond, {}, 1},
                 {Kind::kSpecial, {sep_id}, 1}};
  return layout;
}

int64_t EncodingTemplate::AddedTokens(bool is_pair) const {
  int64_t count = 0;
  for (const TemplatePiece& piece : is_pair ? pair : single) {
    count += static_cast<int64_t>(piece.ids.size());
  }
  return count;
}

int32_t EncodingTemplate::FirstSpecialId() const {
  for (const TemplatePiece& piece : single) {
    if (!piece.ids.empty()) return piece.ids.front();
  }
  return -1;
}

int32_t EncodingTemplate::LastSpecialId() const {
  for (auto it = single.rbegin(); it != single.rend(); ++it) {
    if (!it->ids.empty()) return it->ids.back();
  }
  return -1;
}

absl::StatusOr<Encoding> AssembleEncoding(const EncodingTemplate& layout, const TextTokens& first,
                                          const TextTokens* second,
                                          const TruncationOptions& truncation) {
  const std::optional<size_t> second_length =
      second != nullptr ? std::optional<size_t>(second->ids.size()) : std::nullopt;
  const int64_t added = layout.AddedTokens(second != nullptr);
  DFLASH_ASSIGN_OR_RETURN(const KeptLengths kept,
                          ComputeTruncation(first.ids.size(), second_length, truncation, added));
  Encoding encoding;
  encoding.first_tokens_before_truncation = first.ids.size();
  encoding.second_tokens_before_truncation = second_length.value_or(0);
  encoding.truncated = kept.first < first.ids.size() || kept.second < second_length.value_or(0);
  const size_t total = kept.first + kept.second + static_cast<size_t>(added);
  encoding.ids.reserve(total);
  encoding.token_type_ids.reserve(total);
  encoding.special_tokens_mask.reserve(total);
  encoding.sources.reserve(total);
  encoding.offsets.reserve(total);
  auto add = [&](int32_t id, int32_t type, TokenSource source, ByteSpan span) {
    encoding.ids.push_back(id);
    encoding.token_type_ids.push_back(type);
    encoding.special_tokens_mask.push_back(source == TokenSource::kTemplate ? 1 : 0);
    encoding.sources.push_back(source);
    encoding.offsets.push_back(span);
  };
  // Left truncation keeps a text's last `keep` tokens, right truncation its first.
  auto add_text = [&](const TextTokens& tokens, size_t keep, int32_t type, TokenSource source) {
    const size_t start =
        truncation.side == TruncationSide::kLeft ? tokens.ids.size() - keep : size_t{0};
    for (size_t i = start; i < start + keep; ++i) {
      add(tokens.ids[i], type, source, tokens.offsets[i]);
    }
  };
  for (const TemplatePiece& piece : second != nullptr ? layout.pair : layout.single) {
    switch (piece.kind) {
      case TemplatePiece::Kind::kSpecial:
        for (const int32_t id : piece.ids) add(id, piece.type_id, TokenSource::kTemplate, {});
        break;
      case TemplatePiece::Kind::kFirst:
        add_text(first, kept.first, piece.type_id, TokenSource::kFirst);
        break;
      case TemplatePiece::Kind::kSecond:
        add_text(*second, kept.second, piece.type_id, TokenSource::kSecond);
        break;
    }
  }
  return encoding;
}

}  // namespace dflash
