// Character properties the tokenizer.json components rely on, with the definitions the Rust
// `tokenizers` library uses (Rust's char methods, the regex crate's \s and \w), taken from
// libutf8proc's Unicode tables.
#pragma once

#include <vector>

namespace dflash::tokenizer_json {

// Unicode White_Space (Rust's char::is_whitespace; \s of the regex crate and of Oniguruma).
bool IsWhiteSpace(char32_t code_point);
// \w of the regex crate: Alphabetic, marks, decimal digits, connector punctuation, joiners.
bool IsWordCharacter(char32_t code_point);
// The Punctuation pre-tokenizer's test: an ASCII punctuation character or general category P*
// as of Unicode 8.0, the tables of the unicode_categories crate that tokenizers uses.
bool IsTokenizersPunctuation(char32_t code_point);
// Rust's char::to_lowercase: the full lower-case mapping (one or two characters).
void AppendLowercase(char32_t code_point, std::vector<char32_t>* out);

}  // namespace dflash::tokenizer_json
