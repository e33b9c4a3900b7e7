#include "server/scoring/token_aggregation.h"

#include <algorithm>
#include <cstddef>

#include "absl/strings/match.h"

namespace dflash {
namespace {

constexpr absl::string_view kWordBoundary = "\xE2\x96\x81";  // U+2581 "▁".

// A token or word with its label decided, before grouping.
struct Labelled {
  int label_id = 0;
  float score = 0;
  std::string word;
  uint32_t begin = 0;
  uint32_t end = 0;
  int token_index = -1;
};

// The highest probability's index (the first of equal ones).
int ArgMax(std::span<const float> values) {
  return static_cast<int>(std::max_element(values.begin(), values.end()) - values.begin());
}

// What the pipeline shows for a token: its piece, or for the unknown token the text it covers.
std::string TokenWord(absl::string_view text, const ScoredToken& token) {
  if (!token.unknown) return token.piece;
  const size_t begin = std::min<size_t>(token.begin, text.size());
  const size_t end = std::clamp<size_t>(token.end, begin, text.size());
  return std::string(text.substr(begin, end - begin));
}

Labelled LabelToken(absl::string_view text, const ScoredToken& token) {
  const int label = ArgMax(token.probabilities);
  return Labelled{label,
                  token.probabilities[static_cast<size_t>(label)],
                  TokenWord(text, token),
                  token.begin,
                  token.end,
                  token.index};
}

// One word (its tokens, in order) labelled by `strategy` (kFirst, kAverage or kMax).
Labelled LabelWord(absl::string_view text, std::span<const ScoredToken> tokens,
                   AggregationStrategy strategy) {
  std::vector<std::string> words;
  words.reserve(tokens.size());
  for (const ScoredToken& token : tokens) words.push_back(TokenWord(text, token));
  Labelled word{0, 0, JoinPieces(words), tokens.front().begin, tokens.back().end, -1};
  if (strategy == AggregationStrategy::kAverage) {
    std::vector<double> sums(tokens.front().probabilities.size(), 0.0);
    for (const ScoredToken& token : tokens) {
      for (size_t l = 0; l < sums.size(); ++l) sums[l] += token.probabilities[l];
    }
    std::vector<float> means(sums.size());
    for (size_t l = 0; l < sums.size(); ++l) {
      means[l] = static_cast<float>(sums[l] / static_cast<double>(tokens.size()));
    }
    word.label_id = ArgMax(means);
    word.score = means[static_cast<size_t>(word.label_id)];
    return word;
  }
  const ScoredToken* chosen = &tokens.front();
  if (strategy == AggregationStrategy::kMax) {
    float best = -1;
    for (const ScoredToken& token : tokens) {
      const float top = *std::max_element(token.probabilities.begin(), token.probabilities.end());
      if (top > best) {
        best = top;
        chosen = &token;
      }
    }
  }
  word.label_id = ArgMax(chosen->probabilities);
  word.score = chosen->probabilities[static_cast<size_t>(word.label_id)];
  return word;
}

// A label's tag for grouping: "B-PER" and "I-PER" are tag "PER", beginning and inside; any
// other name is its own tag, inside.
struct Tag {
  bool begins = false;
  absl::string_view name;
};
Tag TagOf(absl::string_view label) {
  if (absl::StartsWith(label, "B-")) return Tag{true, label.substr(2)};
  if (absl::StartsWith(label, "I-")) return Tag{false, label.substr(2)};
  return Tag{false, label};
}

// The entity a group reports: its first label after the first "-".
std::string GroupEntity(absl::string_view label) {
  const size_t dash = label.find('-');
  return std::string(dash == absl::string_view::npos ? label : label.substr(dash + 1));
}

TokenEntity MakeGroup(std::span<const Labelled> members, std::span<const std::string> labels) {
  double sum = 0;
  std::vector<std::string> words;
  words.reserve(members.size());
  for (const Labelled& member : members) {
    sum += member.score;
    words.push_back(member.word);
  }
  TokenEntity group;
  group.label = GroupEntity(labels[static_cast<size_t>(members.front().label_id)]);
  group.score = static_cast<float>(sum / static_cast<double>(members.size()));
  group.word = JoinPieces(words);
  group.begin = members.front().begin;
  group.end = members.back().end;
  return group;
}

// Adjacent entries with the same tag form a group; a "B-" entry always starts a new one.
std::vector<TokenEntity> GroupLabelled(const std::vector<Labelled>& entries,
                                       std::span<const std::string> labels) {
  std::vector<TokenEntity> groups;
  size_t first = 0;
  for (size_t i = 1; i <= entries.size(); ++i) {
    if (i < entries.size()) {
      const Tag tag = TagOf(labels[static_cast<size_t>(entries[i].label_id)]);
      const Tag previous = TagOf(labels[static_cast<size_t>(entries[i - 1].label_id)]);
      if (!tag.begins && tag.name == previous.name) continue;
    }
    if (i > first) {
      groups.push_back(
          MakeGroup(std::span<const Labelled>(entries).subspan(first, i - first), labels));
    }
    first = i;
  }
  return groups;
}

bool Ignored(absl::string_view label, std::span<const std::string> ignore_labels) {
  return std::find(ignore_labels.begin(), ignore_labels.end(), label) != ignore_labels.end();
}

}  // namespace

absl::string_view AggregationStrategyName(AggregationStrategy strategy) {
  switch (strategy) {
    case AggregationStrategy::kNone:
      return "none";
    case AggregationStrategy::kSimple:
      return "simple";
    case AggregationStrategy::kFirst:
      return "first";
    case AggregationStrategy::kAverage:
      return "average";
    case AggregationStrategy::kMax:
      return "max";
  }
  return "unknown";
}

bool ContinuesWord(absl::string_view text, uint32_t begin) {
  if (begin == 0 || begin > text.size()) return false;
  if (text[begin - 1] == ' ') return false;
  return begin == text.size() || text[begin] != ' ';
}

std::string JoinPieces(std::span<const std::string> pieces) {
  std::string text;
  for (size_t p = 0; p < pieces.size(); ++p) {
    absl::string_view piece = pieces[p];
    for (size_t at = piece.find(kWordBoundary); at != absl::string_view::npos;
         at = piece.find(kWordBoundary)) {
      text.append(piece.data(), at);
      if (p > 0) text.push_back(' ');
      piece.remove_prefix(at + kWordBoundary.size());
    }
    text.append(piece.data(), piece.size());
  }
  return text;
}

std::vector<TokenEntity> AggregateTokens(absl::string_view text,
                                         std::span<const ScoredToken> tokens,
                                         std::span<const std::string> labels,
                                         AggregationStrategy strategy,
                                         std::span<const std::string> ignore_labels) {
  std::vector<Labelled> entries;
  if (strategy == AggregationStrategy::kNone || strategy == AggregationStrategy::kSimple) {
    entries.reserve(tokens.size());
    for (const ScoredToken& token : tokens) entries.push_back(LabelToken(text, token));
  } else {
    // An unknown token always starts a word; any other token continues one by the heuristic.
    size_t first = 0;
    for (size_t i = 1; i <= tokens.size(); ++i) {
      if (i < tokens.size() && !tokens[i].unknown && ContinuesWord(text, tokens[i].begin)) {
        continue;
      }
      if (i > first) entries.push_back(LabelWord(text, tokens.subspan(first, i - first), strategy));
      first = i;
    }
  }
  std::vector<TokenEntity> entities;
  if (strategy == AggregationStrategy::kNone) {
    for (const Labelled& entry : entries) {
      const std::string& label = labels[static_cast<size_t>(entry.label_id)];
      if (Ignored(label, ignore_labels)) continue;
      entities.push_back(TokenEntity{label, entry.label_id, entry.score, entry.word, entry.begin,
                                     entry.end, entry.token_index});
    }
    return entities;
  }
  for (TokenEntity& group : GroupLabelled(entries, labels)) {
    if (!Ignored(group.label, ignore_labels)) entities.push_back(std::move(group));
  }
  return entities;
}

}  // namespace dflash
