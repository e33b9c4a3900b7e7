#include "server/tokenizer/tokenizer_json/aligned_text.h"

#include <algorithm>

#include "server/tokenizer/tokenizer_json/unicode_properties.h"

namespace dflash::tokenizer_json {
namespace {

size_t Utf8Length(char32_t code_point) {
  if (code_point < 0x80) return 1;
  if (code_point < 0x800) return 2;
  if (code_point < 0x10000) return 3;
  return 4;
}

}  // namespace

AlignedText::AlignedText(absl::string_view text, size_t shift)
    : text_(text), shift_(shift), original_size_(text.size()) {
  alignments_.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) {
    const DecodedChar decoded = DecodeUtf8At(text, offset);
    const Alignment alignment{static_cast<uint32_t>(shift + offset),
                              static_cast<uint32_t>(shift + offset + decoded.length)};
    alignments_.insert(alignments_.end(), decoded.length, alignment);
    offset += decoded.length;
  }
}

std::optional<std::pair<size_t, size_t>> AlignedText::TextRangeOfOriginal(size_t begin,
                                                                          size_t end) const {
  if (begin == end) return std::make_pair(begin, end);
  if (begin > end) return std::nullopt;
  std::optional<size_t> first;
  std::optional<size_t> last;
  for (size_t i = 0; i < alignments_.size(); ++i) {
    const size_t a_begin = alignments_[i].begin - shift_;
    const size_t a_end = alignments_[i].end - shift_;
    if (end < a_end) break;
    if (!first.has_value() && begin <= a_begin && a_begin != a_end) first = i;
    last = i + 1;
  }
  if (first.has_value() && last.has_value()) return std::make_pair(*first, *last);
  if (first.has_value()) return std::make_pair(*first, *first);
  if (last.has_value()) return std::make_pair(*last, *last);
  return std::nullopt;
}

void AlignedText::TransformRange(size_t begin, size_t end, const std::vector<CharChange>& changes,
                                 size_t initial_offset) {
  // Byte sizes of the characters being replaced, consumed in order.
  std::vector<uint8_t> replaced;
  for (size_t offset = begin; offset < end;) {
    const size_t length = DecodeUtf8At(text_, offset).length;
    replaced.push_back(static_cast<uint8_t>(length));
    offset += length;
  }
  size_t next_replaced = 0;
  size_t offset = begin;
  for (; next_replaced < replaced.size() && next_replaced < initial_offset; ++next_replaced) {
    offset += replaced[next_replaced];
  }
  const Alignment at_start{static_cast<uint32_t>(shift_), static_cast<uint32_t>(shift_)};
  auto alignment_at = [&](size_t index) {
    // A well-formed change list never reads past the text; a clamp keeps a bad one harmless.
    if (alignments_.empty()) return at_start;
    return alignments_[std::min(index, alignments_.size() - 1)];
  };
  std::string text;
  std::vector<Alignment> alignments;
  text.reserve(end - begin);
  alignments.reserve(end - begin);
  for (const CharChange& change : changes) {
    Alignment alignment;
    if (change.change > 0) {
      alignment = offset < 1 ? at_start : alignment_at(offset - 1);
    } else {
      alignment = alignment_at(offset);
      if (next_replaced < replaced.size()) offset += replaced[next_replaced++];
      for (int64_t removed = 0; removed < -change.change && next_replaced < replaced.size();
           ++removed) {
        offset += replaced[next_replaced++];
      }
    }
    AppendUtf8(change.code_point, &text);
    alignments.insert(alignments.end(), Utf8Length(change.code_point), alignment);
  }
  text_.replace(begin, end - begin, text);
  alignments_.erase(alignments_.begin() + static_cast<std::ptrdiff_t>(begin),
                    alignments_.begin() + static_cast<std::ptrdiff_t>(end));
  alignments_.insert(alignments_.begin() + static_cast<std::ptrdiff_t>(begin), alignments.begin(),
                     alignments.end());
}

void AlignedText::Transform(const std::vector<CharChange>& changes, size_t initial_offset) {
  // tokenizers addresses "the whole text" through the original range, which skips leading
  // zero-width bytes.
  const std::optional<std::pair<size_t, size_t>> range = TextRangeOfOriginal(0, original_size_);
  if (!range.has_value()) return;
  TransformRange(range->first, range->second, changes, initial_offset);
}

void AlignedText::Prepend(absl::string_view prefix) {
  if (text_.empty() || prefix.empty()) return;
  const DecodedChar next = DecodeUtf8At(text_, 0);
  std::vector<CharChange> changes;
  for (size_t offset = 0; offset < prefix.size();) {
    const DecodedChar c = DecodeUtf8At(prefix, offset);
    changes.push_back({c.code_point, offset == 0 ? 0 : 1});
    offset += c.length;
  }
  changes.push_back({next.code_point, 1});
  TransformRange(0, next.length, changes, 0);
}

void AlignedText::ReplaceMatches(const std::vector<std::pair<size_t, size_t>>& matches,
                                 absl::string_view content) {
  if (matches.empty()) return;
  std::string text;
  std::vector<Alignment> alignments;
  text.reserve(text_.size());
  alignments.reserve(alignments_.size());
  const Alignment at_start{static_cast<uint32_t>(shift_), static_cast<uint32_t>(shift_)};
  size_t last_end = 0;
  for (const auto& [begin, end] : matches) {
    text.append(text_, last_end, begin - last_end);
    alignments.insert(alignments.end(), alignments_.begin() + static_cast<std::ptrdiff_t>(last_end),
                      alignments_.begin() + static_cast<std::ptrdiff_t>(begin));
    // Every inserted character takes the alignment of the match's last byte.
    const Alignment alignment = end < 1 ? at_start : alignments_[end - 1];
    text.append(content.data(), content.size());
    alignments.insert(alignments.end(), content.size(), alignment);
    last_end = end;
  }
  text.append(text_, last_end);
  alignments.insert(alignments.end(), alignments_.begin() + static_cast<std::ptrdiff_t>(last_end),
                    alignments_.end());
  text_ = std::move(text);
  alignments_ = std::move(alignments);
}

void AlignedText::Strip(bool left, bool right) {
  std::vector<char32_t> chars;
  for (size_t offset = 0; offset < text_.size();) {
    const DecodedChar c = DecodeUtf8At(text_, offset);
    chars.push_back(c.code_point);
    offset += c.length;
  }
  size_t leading = 0;
  if (left) {
    while (leading < chars.size() && IsWhiteSpace(chars[leading])) ++leading;
  }
  size_t trailing = 0;
  if (right) {
    while (trailing < chars.size() && IsWhiteSpace(chars[chars.size() - 1 - trailing])) {
      ++trailing;
    }
  }
  if (leading == 0 && trailing == 0) return;
  std::vector<CharChange> changes;
  const size_t count = chars.size();
  for (size_t i = 0; i < count; ++i) {
    if (i < leading || i + trailing >= count) continue;
    // tokenizers compares the character index with the byte length here; the change only moves
    // the read position past the dropped tail, so it does not alter any alignment.
    const bool last_kept = i + trailing + 1 == text_.size();
    changes.push_back({chars[i], last_kept ? -static_cast<int64_t>(trailing) : 0});
  }
  Transform(changes, leading);
}

std::pair<size_t, size_t> AlignedText::InputRange(size_t begin, size_t end) const {
  if (begin >= end) return {shift_ + begin, shift_ + begin};
  return {alignments_[begin].begin, alignments_[end - 1].end};
}

AlignedText AlignedText::Slice(size_t begin, size_t end) const {
  AlignedText slice;
  slice.text_ = text_.substr(begin, end - begin);
  if (begin == end) {
    // tokenizers takes the empty text range for an original range here; such slices are dropped
    // by every caller.
    slice.shift_ = shift_ + begin;
    return slice;
  }
  slice.alignments_.assign(alignments_.begin() + static_cast<std::ptrdiff_t>(begin),
                           alignments_.begin() + static_cast<std::ptrdiff_t>(end));
  slice.shift_ = alignments_[begin].begin;
  const uint32_t original_end = alignments_[end - 1].end;
  slice.original_size_ = original_end > slice.shift_ ? original_end - slice.shift_ : 0;
  return slice;
}

std::vector<AlignedText> AlignedText::Split(const std::vector<PatternMatch>& matches,
                                            SplitBehavior behavior) const {
  struct Piece {
    size_t begin;
    size_t end;
    bool remove;
  };
  std::vector<Piece> pieces;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const PatternMatch& m : matches) pieces.push_back({m.begin, m.end, false});
      break;
    case SplitBehavior::kRemoved:
      for (const PatternMatch& m : matches) pieces.push_back({m.begin, m.end, m.is_match});
      break;
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const PatternMatch& m : matches) {
        if (m.is_match == previous_match && !pieces.empty()) {
          pieces.back().end = m.end;
        } else {
          pieces.push_back({m.begin, m.end, false});
        }
        previous_match = m.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const PatternMatch& m : matches) {
        if (m.is_match && !previous_match && !pieces.empty()) {
          pieces.back().end = m.end;
        } else {
          pieces.push_back({m.begin, m.end, false});
        }
        previous_match = m.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->is_match && !previous_match && !pieces.empty()) {
          pieces.back().begin = it->begin;
        } else {
          pieces.push_back({it->begin, it->end, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
  }
  std::vector<AlignedText> out;
  for (const Piece& piece : pieces) {
    if (piece.remove || piece.begin == piece.end) continue;
    out.push_back(Slice(piece.begin, piece.end));
  }
  return out;
}

}  // namespace dflash::tokenizer_json
