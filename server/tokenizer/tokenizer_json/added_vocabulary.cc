#include "server/tokenizer/tokenizer_json/added_vocabulary.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/tokenizer/tokenizer_json/unicode_properties.h"
#include "server/tokenizer/unicode_text.h"

namespace dflash::tokenizer_json {
namespace {

constexpr size_t kMaxTokenBytes = 1024;

bool EndsWithWordCharacter(absl::string_view text) {
  if (text.empty()) return false;
  size_t start = text.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return IsWordCharacter(DecodeUtf8At(text, start).code_point);
}

bool StartsWithWordCharacter(absl::string_view text) {
  return !text.empty() && IsWordCharacter(DecodeUtf8At(text, 0).code_point);
}

// Start of the whitespace run that ends `text`.
size_t TrailingSpaceStart(absl::string_view text) {
  size_t start = text.size();
  while (start > 0) {
    size_t previous = start - 1;
    while (previous > 0 && (static_cast<unsigned char>(text[previous]) & 0xC0) == 0x80) {
      --previous;
    }
    if (!IsWhiteSpace(DecodeUtf8At(text, previous).code_point)) break;
    start = previous;
  }
  return start;
}

// Length of the whitespace run that starts `text`.
size_t LeadingSpaceLength(absl::string_view text) {
  size_t end = 0;
  while (end < text.size()) {
    const DecodedChar c = DecodeUtf8At(text, end);
    if (!IsWhiteSpace(c.code_point)) break;
    end += c.length;
  }
  return end;
}

}  // namespace

void AddedVocabulary::Matcher::Build(std::vector<std::pair<std::string, int32_t>> patterns) {
  patterns_ = std::move(patterns);
  std::sort(patterns_.begin(), patterns_.end());
  for (const auto& [pattern, id] : patterns_) {
    longest_ = std::max(longest_, pattern.size());
    first_byte_[static_cast<unsigned char>(pattern[0])] = true;
  }
}

std::pair<size_t, int32_t> AddedVocabulary::Matcher::LongestAt(absl::string_view text,
                                                               size_t offset) const {
  std::pair<size_t, int32_t> best{0, -1};
  if (!first_byte_[static_cast<unsigned char>(text[offset])]) return best;
  auto low = patterns_.begin();
  auto high = patterns_.end();
  const size_t limit = std::min(longest_, text.size() - offset);
  for (size_t length = 1; length <= limit && low != high; ++length) {
    const char byte = text[offset + length - 1];
    low = std::lower_bound(low, high, byte, [length](const auto& entry, char value) {
      return entry.first.size() < length || static_cast<unsigned char>(entry.first[length - 1]) <
                                                static_cast<unsigned char>(value);
    });
    high = std::upper_bound(low, high, byte, [length](char value, const auto& entry) {
      return static_cast<unsigned char>(value) <
             static_cast<unsigned char>(entry.first[length - 1]);
    });
    if (low != high && low->first.size() == length) {
      best = {length, low->second};
      ++low;
    }
  }
  return best;
}

absl::StatusOr<std::unique_ptr<AddedVocabulary>> AddedVocabulary::Parse(
    const JsonNode& node, const UnigramModel& model, const Normalizer* normalizer,
    size_t max_tokens) {
  auto vocabulary = std::unique_ptr<AddedVocabulary>(new AddedVocabulary());
  if (node.IsNull()) return vocabulary;
  DFLASH_RETURN_IF_ERROR(node.ExpectArray());
  if (node.Size() > max_tokens) {
    return node.Invalid(
        absl::StrCat("holds ", node.Size(), " added tokens, more than the limit of ", max_tokens));
  }
  int32_t next_id = model.piece_count();
  for (size_t i = 0; i < node.Size(); ++i) {
    const JsonNode entry = node.Element(i);
    DFLASH_RETURN_IF_ERROR(entry.ExpectObject());
    AddedToken token;
    DFLASH_ASSIGN_OR_RETURN(token.content, entry.Member("content").String());
    DFLASH_RETURN_IF_ERROR(ValidateUtf8(token.content, entry.Member("content").path()));
    if (token.content.size() > kMaxTokenBytes) {
      return entry.Member("content").Invalid(absl::StrCat(
          "an added token of ", token.content.size(), " bytes (at most ", kMaxTokenBytes, ")"));
    }
    DFLASH_ASSIGN_OR_RETURN(token.single_word, entry.Member("single_word").OptionalBool(false));
    DFLASH_ASSIGN_OR_RETURN(token.lstrip, entry.Member("lstrip").OptionalBool(false));
    DFLASH_ASSIGN_OR_RETURN(token.rstrip, entry.Member("rstrip").OptionalBool(false));
    DFLASH_ASSIGN_OR_RETURN(token.special, entry.Member("special").OptionalBool(false));
    DFLASH_ASSIGN_OR_RETURN(token.normalized,
                            entry.Member("normalized").OptionalBool(!token.special));
    if (token.content.empty()) continue;
    // The same content with the same flags again changes nothing.
    if (const auto it = vocabulary->ids_.find(token.content); it != vocabulary->ids_.end()) {
      if (vocabulary->tokens_.at(it->second) == token) continue;
    }
    int32_t id = vocabulary->TokenToId(token.content);
    if (id < 0) id = model.PieceToId(token.content);
    if (id < 0) id = next_id++;
    vocabulary->ids_[token.content] = id;
    vocabulary->tokens_[id] = std::move(token);
  }
  std::vector<std::pair<std::string, int32_t>> raw;
  std::vector<std::pair<std::string, int32_t>> normalized;
  for (const auto& [id, token] : vocabulary->tokens_) {
    vocabulary->end_id_ = std::max(vocabulary->end_id_, id + 1);
    if (!token.normalized) {
      raw.emplace_back(token.content, id);
      continue;
    }
    std::string pattern = token.content;
    if (normalizer != nullptr) {
      AlignedText text(token.content, 0);
      normalizer->Normalize(&text);
      pattern = text.text();
    }
    if (!pattern.empty()) normalized.emplace_back(std::move(pattern), id);
  }
  // Two tokens whose patterns coincide (after normalization) would make the match ambiguous;
  // tokenizers' automaton rejects the same duplicate when it is built.
  for (auto* patterns : {&raw, &normalized}) {
    std::vector<std::pair<std::string, int32_t>> sorted = *patterns;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (sorted[i].first == sorted[i - 1].first) {
        return node.Invalid(absl::StrCat("added tokens ", sorted[i - 1].second, " and ",
                                         sorted[i].second, " match the same text \"",
                                         sorted[i].first, "\""));
      }
    }
  }
  vocabulary->raw_matcher_.Build(std::move(raw));
  vocabulary->normalized_matcher_.Build(std::move(normalized));
  return vocabulary;
}

int32_t AddedVocabulary::TokenToId(absl::string_view content) const {
  const auto it = ids_.find(content);
  return it == ids_.end() ? -1 : it->second;
}

const std::string* AddedVocabulary::IdToToken(int32_t id) const {
  const auto it = tokens_.find(id);
  return it == tokens_.end() ? nullptr : &it->second.content;
}

bool AddedVocabulary::IsSpecial(int32_t id) const {
  const auto it = tokens_.find(id);
  return it != tokens_.end() && it->second.special;
}

void AddedVocabulary::SplitWithMatcher(const AlignedText& text, const Matcher& matcher,
                                       std::vector<TextSegment>* out) const {
  const std::string& s = text.text();
  if (matcher.empty() || s.empty()) {
    if (!s.empty()) out->push_back({text, -1});
    return;
  }
  size_t start_offset = 0;
  size_t offset = 0;
  while (offset < s.size()) {
    const auto [length, id] = matcher.LongestAt(s, offset);
    if (length == 0) {
      ++offset;
      continue;
    }
    size_t start = offset;
    size_t stop = offset + length;
    // Like tokenizers' automaton, the search goes on after the match itself, whatever the
    // flags add to it.
    offset = stop;
    const AddedToken& token = tokens_.at(id);
    if (token.single_word) {
      const bool start_space =
          start == 0 || !EndsWithWordCharacter(absl::string_view(s).substr(0, start));
      const bool stop_space =
          stop == s.size() || !StartsWithWordCharacter(absl::string_view(s).substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) {
      start = std::max(TrailingSpaceStart(absl::string_view(s).substr(0, start)), start_offset);
    }
    if (token.rstrip) stop += LeadingSpaceLength(absl::string_view(s).substr(stop));
    if (start_offset < start) out->push_back({text.Slice(start_offset, start), -1});
    out->push_back({text.Slice(start, stop), id});
    start_offset = stop;
  }
  if (start_offset < s.size()) out->push_back({text.Slice(start_offset, s.size()), -1});
}

std::vector<TextSegment> AddedVocabulary::ExtractAndNormalize(absl::string_view text,
                                                              const Normalizer* normalizer) const {
  std::vector<TextSegment> raw_split;
  SplitWithMatcher(AlignedText(text, 0), raw_matcher_, &raw_split);
  std::vector<TextSegment> segments;
  for (TextSegment& segment : raw_split) {
    if (segment.added_token_id >= 0) {
      segments.push_back(std::move(segment));
      continue;
    }
    if (normalizer != nullptr) normalizer->Normalize(&segment.text);
    SplitWithMatcher(segment.text, normalized_matcher_, &segments);
  }
  return segments;
}

}  // namespace dflash::tokenizer_json
