"""Writes the tokenizer golden fixtures next to this script.

Run from the repository root, with the reference environment (never at test time):

    HF_HUB_OFFLINE=1 /opt/hfref/bin/python tests/golden/tokenizer/make_tokenizer_goldens.py

Inputs: tests/golden/tokenizer/spm.model (see make_spm.sh) and a few lines of
config/demo/modern_english.txt. Outputs:

- tokenizer_goldens.json: tokenizer settings (the JSON files a checkpoint would carry) and cases.
  Reference (a), recorded in "ids"/"type_ids"/"offsets", is docs/deberta.md#encoding-a-text spelled
  out here in Python: added-token splitting, str.lower(), the punctuation rule via unicodedata,
  python sentencepiece on each piece, the [CLS] A [SEP] (B [SEP]) template, and the Rust truncation
  rule. Reference (b) is transformers' DebertaV2Tokenizer built the way from_pretrained builds it
  from spm.model. Where (b) differs from (a) the case carries "hf5_differs": true and "hf_ids".
  Expected differences: transformers 5 normalizes with NFC instead of sentencepiece's nmt_nfkc
  (docs/deberta.md#transformers-5-tokenizer), turns whitespace between two punctuation characters
  into an extra "▁" under split_by_punct, and drops an empty second text. Truncation cases record
  transformers' own result as kept lengths: the script stops if (a)'s truncation rule disagrees,
  except for a max_length below the special-token count, which transformers silently ignores and our
  tokenizer rejects (kept null, "hf_untruncated").
- unicode_properties.json: Python's str.lower() and punctuation rule over every code point, to
  check the C++ Unicode helpers exhaustively.
"""

import json
import os
import sys
import unicodedata

import sentencepiece
from transformers import AddedToken, DebertaV2Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SPM_PATH = os.path.join(HERE, "spm.model")

SP = sentencepiece.SentencePieceProcessor(model_file=SPM_PATH)
PIECES = SP.get_piece_size()


# ---------------------------------------------------------------------------------------------
# Settings: the tokenizer files of a checkpoint directory, in the forms transformers writes.

def v5_config(do_lower_case, split_by_punct, extra=()):
    """tokenizer_config.json as transformers 5.17's save_pretrained writes it."""
    return {
        "add_prefix_space": True,
        "backend": "tokenizers",
        "bos_token": "[CLS]",
        "cls_token": "[CLS]",
        "do_lower_case": do_lower_case,
        "eos_token": "[SEP]",
        "extra_special_tokens": ["[PAD]", "[CLS]", "[SEP]", *extra],
        "mask_token": "[MASK]",
        # Python's json writes int(1e30) exactly, as transformers does.
        "model_max_length": int(1e30),
        "pad_token": "[PAD]",
        "sep_token": "[SEP]",
        "split_by_punct": split_by_punct,
        "tokenizer_class": "DebertaV2Tokenizer",
        "unk_id": 3,
        "unk_token": "[UNK]",
    }


def added_token_object(content):
    return {"content": content, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": True}


EXTRA_TOKENS = ["<ent>", "[MASK]x", "</ent>"]

SETTINGS = [
    {"name": "plain", "do_lower_case": False, "split_by_punct": False, "extra": [],
     "files": {"tokenizer_config.json": v5_config(False, False)}},
    # transformers-4-era files: no added_tokens_decoder, legacy special_tokens_map/added_tokens.
    {"name": "lower", "do_lower_case": True, "split_by_punct": False, "extra": [],
     "files": {
         "tokenizer_config.json": {"do_lower_case": True, "vocab_type": "spm"},
         "special_tokens_map.json": {"bos_token": "[CLS]", "eos_token": "[SEP]",
                                     "unk_token": "[UNK]", "sep_token": "[SEP]",
                                     "pad_token": "[PAD]", "cls_token": "[CLS]",
                                     "mask_token": "[MASK]"},
         "added_tokens.json": {"[MASK]": PIECES}}},
    # transformers 4.3x files: AddedToken objects and added_tokens_decoder.
    {"name": "punct", "do_lower_case": False, "split_by_punct": True, "extra": [],
     "files": {"tokenizer_config.json": {
         "added_tokens_decoder": {str(i): added_token_object(t) for i, t in
                                  [(0, "[PAD]"), (1, "[CLS]"), (2, "[SEP]"), (3, "[UNK]"),
                                   (PIECES, "[MASK]")]},
         "bos_token": "[CLS]", "clean_up_tokenization_spaces": True, "cls_token": "[CLS]",
         "do_lower_case": False, "eos_token": "[SEP]", "mask_token": "[MASK]",
         "model_max_length": 512, "pad_token": "[PAD]", "sep_token": "[SEP]",
         "sp_model_kwargs": {}, "split_by_punct": True,
         "tokenizer_class": "DebertaV2Tokenizer", "unk_token": "[UNK]", "vocab_type": "spm"}}},
    {"name": "lower_punct", "do_lower_case": True, "split_by_punct": True, "extra": [],
     "files": {"tokenizer_config.json": v5_config(True, True)}},
    {"name": "extra_specials", "do_lower_case": True, "split_by_punct": False,
     "extra": EXTRA_TOKENS,
     "files": {"tokenizer_config.json": v5_config(True, False, EXTRA_TOKENS)}},
]


def hf_tokenizer(setting):
    """DebertaV2Tokenizer as from_pretrained builds it from spm.model (SentencePieceExtractor):
    Unigram over (piece, score), unk_id from the trainer spec, control pieces as special
    AddedTokens. Done by hand because the extractor needs the protobuf package."""
    vocab = [(SP.id_to_piece(i), SP.get_score(i)) for i in range(PIECES)]
    specials = [AddedToken(SP.id_to_piece(i), normalized=False, special=True)
                for i in range(PIECES) if SP.is_control(i)]
    specials += [AddedToken(t, normalized=False, special=True) for t in setting["extra"]]
    return DebertaV2Tokenizer(vocab=vocab, unk_id=SP.unk_id(), additional_special_tokens=specials,
                              do_lower_case=setting["do_lower_case"],
                              split_by_punct=setting["split_by_punct"])


def added_tokens(setting):
    """content -> id, as the C++ tokenizer must resolve them."""
    tokens = {"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "[UNK]": 3, "[MASK]": PIECES}
    for i, token in enumerate(setting["extra"]):
        tokens[token] = PIECES + 1 + i
    return tokens


# ---------------------------------------------------------------------------------------------
# Reference (a): docs/deberta.md#encoding-a-text in Python.

def parse_varint(data, pos):
    value, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def parse_fields(data):
    """Minimal protobuf wire-format reader: yields (field, wire type, value)."""
    pos = 0
    while pos < len(data):
        key, pos = parse_varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = parse_varint(data, pos)
        elif wire == 2:
            length, pos = parse_varint(data, pos)
            value = data[pos:pos + length]
            pos += length
        elif wire == 5:
            value = data[pos:pos + 4]
            pos += 4
        elif wire == 1:
            value = data[pos:pos + 8]
            pos += 8
        else:
            raise ValueError(f"unexpected wire type {wire}")
        yield field, wire, value


def spm_encode(text):
    """python sentencepiece on `text`: [(id, byte begin, byte end)] from SentencePieceText
    (field 2 = pieces; in a piece, 2 = id, 4 = begin, 5 = end; zero fields are omitted)."""
    out = []
    for field, _, value in parse_fields(SP.encode(text, out_type="serialized_proto")):
        if field != 2:
            continue
        piece = {"id": 0, "begin": 0, "end": 0}
        for sub_field, _, sub_value in parse_fields(value):
            if sub_field == 2:
                piece["id"] = sub_value
            elif sub_field == 4:
                piece["begin"] = sub_value
            elif sub_field == 5:
                piece["end"] = sub_value
        out.append((piece["id"], piece["begin"], piece["end"]))
    assert [t[0] for t in out] == SP.encode(text), text
    return out


def split_added(text, tokens):
    """Leftmost, then longest, exact match of the added tokens: [(start, end, id or None)] over
    characters."""
    chunks, plain, i = [], 0, 0
    ordered = sorted(tokens.items(), key=lambda item: -len(item[0]))
    while i < len(text):
        hit = next(((t, tid) for t, tid in ordered if text.startswith(t, i)), None)
        if hit is None:
            i += 1
            continue
        if plain < i:
            chunks.append((plain, i, None))
        chunks.append((i, i + len(hit[0]), hit[1]))
        i += len(hit[0])
        plain = i
    if plain < len(text):
        chunks.append((plain, len(text), None))
    return chunks


def is_punctuation(char):
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def split_punct(text):
    """[(start, end)] over characters: every punctuation character alone, the runs between."""
    pieces, start = [], 0
    for i, char in enumerate(text):
        if is_punctuation(char):
            if start < i:
                pieces.append((start, i))
            pieces.append((i, i + 1))
            start = i + 1
    if start < len(text):
        pieces.append((start, len(text)))
    return pieces


def lower_with_sources(text):
    """str.lower() and, per output character, the index of the input character it came from.
    Characters lower-case independently except capital sigma, whose context decides between
    sigma and final sigma; both are one character, so the whole-string result supplies it."""
    whole = text.lower()
    out, sources = [], []
    for i, char in enumerate(text):
        lowered = "\u03c3" if char == "\u03a3" else char.lower()
        out.append(lowered)
        sources.extend([i] * len(lowered))
    joined = "".join(out)
    assert len(joined) == len(whole)
    fixed = "".join(w if t == "\u03c3" and w == "\u03c2" else t for t, w in zip(joined, whole))
    assert fixed == whole, (text, fixed, whole)
    return whole, sources


def char_to_byte(text):
    """Byte offset of each character index of `text`, plus one for the end."""
    offsets, pos = [], 0
    for char in text:
        offsets.append(pos)
        pos += len(char.encode("utf-8"))
    offsets.append(pos)
    return offsets


def encode_plain(chunk, setting):
    """Content tokens of one text chunk without added tokens: [(id, byte begin, byte end)],
    offsets into `chunk`'s UTF-8."""
    if setting["do_lower_case"]:
        work, sources = lower_with_sources(chunk)
    else:
        work, sources = chunk, list(range(len(chunk)))
    chunk_bytes = char_to_byte(chunk)
    work_bytes = char_to_byte(work)
    # Per byte of `work`: the byte offset in `chunk` of its source character; then the end.
    source_begin = []
    for j, char in enumerate(work):
        source_begin += [chunk_bytes[sources[j]]] * len(char.encode("utf-8"))
    source_begin.append(chunk_bytes[-1])

    def map_begin(b):
        return source_begin[b]

    def map_end(e):
        if e == 0:
            return source_begin[0]
        previous = source_begin[e - 1]
        while e < len(source_begin) - 1 and source_begin[e] == previous:
            e += 1
        return source_begin[e]

    pieces = split_punct(work) if setting["split_by_punct"] else [(0, len(work))]
    out = []
    for start, end in pieces:
        base = work_bytes[start]
        for token_id, begin, stop in spm_encode(work[start:end]):
            out.append((token_id, map_begin(base + begin), map_end(base + stop)))
    return out


def encode_text(text, setting):
    """Steps 1-4 of docs/deberta.md#encoding-a-text: [(id, byte begin, byte end)] into
    `text`'s UTF-8."""
    bytes_at = char_to_byte(text)
    out = []
    for start, end, token_id in split_added(text, added_tokens(setting)):
        if token_id is not None:
            out.append((token_id, bytes_at[start], bytes_at[end]))
            continue
        base = bytes_at[start]
        out += [(t, base + b, base + e) for t, b, e in encode_plain(text[start:end], setting)]
    return out


def truncate(n_a, n_b, strategy, max_length):
    """The Rust tokenizers rule (docs/deberta.md#truncation): kept (n_a, n_b), or None for an
    error."""
    if strategy == "do_not_truncate":
        return n_a, n_b
    specials = 2 if n_b is None else 3
    if max_length < specials:
        return None
    budget = max_length - specials
    if budget == 0:  # tokenizers empties both sequences first, whatever the strategy.
        return 0, (None if n_b is None else 0)
    if n_a + (n_b or 0) <= budget:
        return n_a, n_b
    if n_b is None:
        return (None if strategy == "only_second" else budget), None
    if strategy == "longest_first":
        short, long_ = (n_a, n_b) if n_a <= n_b else (n_b, n_a)
        if short <= budget // 2:
            kept_short, kept_long = short, budget - short
        else:
            kept_short, kept_long = budget // 2, budget - budget // 2
        return (kept_short, kept_long) if n_a <= n_b else (kept_long, kept_short)
    other = n_b if strategy == "only_first" else n_a
    if other >= budget:
        return None
    return (budget - n_b, n_b) if strategy == "only_first" else (n_a, budget - n_a)


def assemble(tokens_a, tokens_b, kept=None, side="right"):
    """[CLS] A [SEP] (B [SEP]) with truncation to `kept` lengths: ids, type ids, offsets."""
    def cut(tokens, n):
        if n is None or n >= len(tokens):
            return tokens
        return tokens[len(tokens) - n:] if side == "left" else tokens[:n]

    kept = kept or (None, None)
    a = cut(tokens_a, kept[0])
    ids = [1] + [t[0] for t in a] + [2]
    types = [0] * len(ids)
    offsets = [[0, 0]] + [[t[1], t[2]] for t in a] + [[0, 0]]
    if tokens_b is not None:
        b = cut(tokens_b, kept[1])
        ids += [t[0] for t in b] + [2]
        types += [1] * (len(b) + 1)
        offsets += [[t[1], t[2]] for t in b] + [[0, 0]]
    return ids, types, offsets


# ---------------------------------------------------------------------------------------------
# Texts.

def modern_lines():
    with open(os.path.join(ROOT, "config", "demo", "modern_english.txt"), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


LINES = modern_lines()

TEXTS = [
    # ASCII words, punctuation, digits, casing.
    "Hello world", "Hello,world!", "The quick brown fox jumps over the lazy dog.",
    "And it came to pass, that the LORD spake unto Moses.", "don't stop-believing; e.g. U.S.A. & co.",
    "a", "A", "I", ".", "x y z", "3.14159 and 2,718 -- 42%", "1234567890", "2024-05-01T12:34:56Z",
    "$100.00 (approx.) #hashtag @user", "foo_bar baz__qux", "path/to/file.txt",
    "email@example.com", "C++ and C# are languages", "<html><body>text</body></html>",
    "[brackets] {braces} (parens)", "'single' \"double\" `back`", "~!@#$%^&*()_+-=[]{}|;':\",./<>?",
    "UPPER lower MiXeD CamelCase", "HELLO WORLD", "Supercalifragilisticexpialidocious",
    "antidisestablishmentarianism", "qwzxv jjjj kkkk", "Wait... what?!", "(((nested)))",
    # Whitespace.
    "", " ", "   ", "\t", "\n", "\r\n", " \t\n ", "  leading spaces", "trailing spaces   ",
    "multiple    internal     spaces", "tab\tseparated\tvalues", "line one\nline two\n\nline four",
    "mixed \t \n whitespace", "\u00a0", "a\u00a0b", "a\u3000b", "a\u2003b em space",
    "zero\u200bwidth", "a\x00b", "\x0b\x0c", "\u2028line separator", "a\u0085b", "\u200b",
    # NFKC-unstable text (transformers 5 differs, docs/deberta.md#transformers-5-tokenizer).
    "Ｆｕｌｌｗｉｄｔｈ", "ﬁne ﬂow ﬀ", "½ № ™", "Ⅻ ①", "x² H₂O", "ｶﾀｶﾅ", "…", "ＡＢＣ１２３",
    "㎏ ㎞", "ℌ ℍ ℕ", "“quotes” ‘single’", "—em dash– en",
    # Latin with diacritics, casing specials, other scripts.
    "ÀÉÎÕÜ àéîõü", "ǅ ǈ ǅungla", "İstanbul İ", "ΣΑΣ ΟΔΟΣ Σ ΑΣ. Σ-Α", "straße STRASSE ẞ",
    "Ωmega ſ K", "Привет, мир!", "ПРИВЕТ МИР", "مرحبا بالعالم", "שלום עולם",
    "नमस्ते दुनिया", "สวัสดีครับ", "Ⓐⓑ 🄰", "ÅNGSTRÖM Ǆ",
    # CJK.
    "日本語のテキスト", "中文文本测试。", "한국어 텍스트", "漢字とかな、カタカナ。", "混合 mixed 文本",
    # Emoji (consecutive unknowns merge into one [UNK]).
    "😀", "😀😀", "😀 😀", "I ❤️ NY", "👍🏽", "👨‍👩‍👧", "a😀b😀c", "🇫🇷 flag", "😀!😀",
    # Combining characters.
    "e\u0301", "é", "cafe\u0301 café", "n\u0303", "a\u0308\u0304", "\u0301 leading combining",
    "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǒ̲ͩ", "ﬁ\u0301", "I\u0307", "\u03a3\u0301",
    # Special and added tokens in the text.
    "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]", "Hello [MASK] world", "Hello[MASK]world",
    "[MASK][MASK]", "[MASK] [SEP] [PAD] [UNK] [CLS]", "[mask] lower-case is not special", "[SEP",
    "[[SEP]]", "text with [SEP] inside", " [MASK] ", "[MASK]x <ent>e</ent>", "<ent>",
    "[MASK]xx", "<ENT>[MASK]X", "İ[MASK]Σ",
    # Longer texts.
    *LINES[:12],
    " ".join(LINES[12:18]),
]

PAIRS = [
    ("Hello world", "Goodbye world"), ("", ""), ("", "x"), ("x", ""), (" ", "\t"),
    ("A man is playing a guitar.", "A person plays an instrument."),
    ("How many people live in the city?", LINES[9]),
    ("what is the capital of france", "Paris is the capital and most populous city of France."),
    ("[MASK] query", "passage [SEP] with separator"), ("日本語", "中文"), ("😀", "😀😀"),
    ("Ｆｕｌｌ", "ﬁne"), ("ΣΑΣ", "İstanbul"), ("tab\tand\nnewline", "  spaced   out  "),
    ("Hello,world!", "Is it? Yes: it is."), ("<ent>x</ent>", "[MASK]x"),
    (LINES[0], LINES[1]), (LINES[2], " ".join(LINES[3:6])),
]

# Truncation: transformers' own truncation is the reference.
LONG_A = " ".join(LINES[20:23])
LONG_B = " ".join(LINES[23:30])
TRUNCATION_TEXTS = [
    (LONG_A, LONG_B), (LONG_B, LONG_A), ("short question?", LONG_B), (LONG_A, "short"),
    ("one two three four five six seven eight nine ten", "alpha beta gamma delta epsilon"),
    ("tie tie tie tie", "tie tie tie tie"), (LONG_A, None), ("", LONG_B), ("[MASK] " * 6, LONG_A),
]
TRUNCATION_LENGTHS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 32, 64, 512]
TRUNCATION_STRATEGIES = ["longest_first", "only_first", "only_second", "do_not_truncate"]


# ---------------------------------------------------------------------------------------------

def hf_encode(tokenizer, a, b, **kwargs):
    try:
        result = tokenizer(a, b, return_token_type_ids=True, return_special_tokens_mask=True,
                           **kwargs)
    except Exception as error:  # transformers raises a plain Exception for truncation errors.
        return {"error": str(error)}
    return {"ids": result["input_ids"], "type_ids": result["token_type_ids"],
            "special": result["special_tokens_mask"]}


def expected_special_mask(ids_a_len, ids_b_len):
    mask = [1] + [0] * ids_a_len + [1]
    if ids_b_len is not None:
        mask += [0] * ids_b_len + [1]
    return mask


def main():
    cases = []
    flagged = 0
    for setting in SETTINGS:
        tokenizer = hf_tokenizer(setting)
        want = added_tokens(setting)
        got = {t: tokenizer.convert_tokens_to_ids(t) for t in want}
        assert got == want, (setting["name"], got, want)
        inputs = [(t, None) for t in TEXTS] + PAIRS
        for a, b in inputs:
            tokens_a = encode_text(a, setting)
            tokens_b = None if b is None else encode_text(b, setting)
            ids, types, offsets = assemble(tokens_a, tokens_b)
            case = {"setting": setting["name"], "a": a}
            if b is not None:
                case["b"] = b
            case["ids"] = ids
            if b is not None:
                case["type_ids"] = types
            case["offsets"] = [x for span in offsets for x in span]  # begin, end, begin, ...
            hf = hf_encode(tokenizer, a, b)
            if hf["ids"] != ids:
                case["hf5_differs"] = True
                case["hf_ids"] = hf["ids"]
                flagged += 1
            else:
                assert hf["type_ids"] == types, case
                assert hf["special"] == expected_special_mask(
                    len(tokens_a), None if b is None else len(tokens_b)), case
            cases.append(case)

    # Truncation, on the "plain" setting. Each input's content ids are stored once; a case
    # records how many content tokens of A and B survive ("kept"), from which the expected ids
    # follow exactly: [CLS] + kept A + [SEP] (+ kept B + [SEP]), cut on the case's side. Cases
    # where transformers ignores a max_length below the special-token count ("hf_untruncated")
    # count as hf5_differs.
    setting = SETTINGS[0]
    tokenizer = hf_tokenizer(setting)
    truncation_inputs, truncation_cases, truncation_count = [], [], 0
    for a, b in TRUNCATION_TEXTS:
        tokens_a = encode_text(a, setting)
        tokens_b = None if b is None else encode_text(b, setting)
        entry = {"a": a, "ids_a": [t[0] for t in tokens_a]}
        if b is not None:
            entry["b"] = b
            entry["ids_b"] = [t[0] for t in tokens_b]
        truncation_inputs.append(entry)
        full = assemble(tokens_a, tokens_b)[0]
        n_b = None if b is None else len(tokens_b)
        for side in ["right", "left"]:
            tokenizer.truncation_side = side
            assert hf_encode(tokenizer, a, b)["ids"] == full, (a, b)
            for strategy in TRUNCATION_STRATEGIES:
                lengths = TRUNCATION_LENGTHS if strategy != "do_not_truncate" else [5]
                # One record per (input, side, strategy): per max_length, the kept content
                # lengths [A, B], or null where our tokenizer must return an error.
                group = {"input": len(truncation_inputs) - 1, "side": side, "strategy": strategy,
                         "max_length": lengths, "kept": [], "hf_untruncated": []}
                for max_length in lengths:
                    hf = hf_encode(tokenizer, a, b, truncation=strategy, max_length=max_length)
                    kept = truncate(len(tokens_a), n_b, strategy, max_length)
                    specials = 2 if b is None else 3
                    if kept is None or kept[0] is None:
                        group["kept"].append(None)
                        if max_length < specials:
                            # transformers skips truncation instead (unsigned wrap-around).
                            assert hf.get("ids") == full, (group, hf)
                            group["hf_untruncated"].append(max_length)
                            flagged += 1
                        else:
                            assert "error" in hf, (group, max_length, hf)
                    else:
                        ids, types, _ = assemble(tokens_a, tokens_b, kept, side)
                        assert "error" not in hf, (group, max_length, hf)
                        assert hf["ids"] == ids, (group, max_length, hf["ids"], ids)
                        assert hf["type_ids"] == types, (group, max_length)
                        group["kept"].append([kept[0], kept[1] or 0])
                    truncation_count += 1
                if not group["hf_untruncated"]:
                    del group["hf_untruncated"]
                truncation_cases.append(group)

    def dump_list(items):
        return "[\n" + ",\n".join(json.dumps(x, ensure_ascii=False) for x in items) + "\n]"

    settings = [{k: s[k] for k in ("name", "files")} for s in SETTINGS]
    with open(os.path.join(HERE, "tokenizer_goldens.json"), "w", encoding="utf-8") as f:
        f.write('{"spm_model": "spm.model",\n"pieces": %d,\n' % PIECES)
        f.write('"settings": %s,\n' % dump_list(settings))
        f.write('"cases": %s,\n' % dump_list(cases))
        f.write('"truncation_inputs": %s,\n' % dump_list(truncation_inputs))
        f.write('"truncation_cases": %s\n}\n' % dump_list(truncation_cases))
    print(f"tokenizer_goldens.json: {len(cases)} cases and {truncation_count} truncation "
          f"cases, {flagged} flagged hf5_differs", file=sys.stderr)
    write_unicode_properties()


# ---------------------------------------------------------------------------------------------

def ranges(predicate):
    out, start = [], None
    for cp in range(0x110000 + 1):
        inside = cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF and predicate(cp)
        if inside and start is None:
            start = cp
        elif not inside and start is not None:
            out.append([start, cp - 1])
            start = None
    return out


def write_unicode_properties():
    final_sigma = "\u03c2"
    lower = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        char = chr(cp)
        if char.lower() != char:
            lower.append([cp, [ord(c) for c in char.lower()]])
    # Python's final-sigma context, probed through str.lower(): "c" + sigma ends in final sigma
    # when c is cased and not case-ignorable; "A" + c + sigma does when c is either.
    cased = ranges(lambda cp: (chr(cp) + "\u03a3").lower()[-1] == final_sigma)
    ignorable = ranges(lambda cp: ("A" + chr(cp) + "\u03a3").lower()[-1] == final_sigma and
                       (chr(cp) + "\u03a3").lower()[-1] != final_sigma)
    data = {
        "python": sys.version.split()[0],
        "unicode_version": unicodedata.unidata_version,
        "assigned": ranges(lambda cp: unicodedata.category(chr(cp)) != "Cn"),
        "lower": lower,
        "punctuation": ranges(lambda cp: is_punctuation(chr(cp))),
        "sigma_cased": cased,
        "sigma_case_ignorable": ignorable,
    }
    with open(os.path.join(HERE, "unicode_properties.json"), "w", encoding="utf-8") as f:
        f.write("{\n")
        f.write(",\n".join(f'"{k}": {json.dumps(v, separators=(",", ":"))}'
                           for k, v in data.items()))
        f.write("\n}\n")
    print(f"unicode_properties.json: Unicode {data['unicode_version']}, {len(lower)} lower-case "
          f"mappings", file=sys.stderr)


if __name__ == "__main__":
    main()
