#!/usr/bin/env python3
"""Builds the tokenizer.json parity fixtures: checkpoint tokenizer directories as transformers
writes them, and the encodings that the `tokenizers` library and transformers give for them.

Run from the repository root (never at test time), with two environments:

    # reference environment, which computes every expected value (no torch needed):
    python3 -m venv /tmp/venv-ref
    /tmp/venv-ref/bin/pip install transformers==5.17.0 tokenizers==0.23.3 \
        sentencepiece==0.2.3 protobuf==7.36.2
    # old-transformers environment, used only to write the v3_hf4 directory
    # (tokenizers 0.20.3 comes with it; sentencepiece 0.2.3 would need protobuf 7):
    python3 -m venv /tmp/venv-hf4
    /tmp/venv-hf4/bin/pip install transformers==4.46.3 sentencepiece==0.2.0 protobuf==4.25.9
    HF_HUB_OFFLINE=1 /tmp/venv-ref/bin/python \
        tests/golden/tokenizer_json/make_tokenizer_json_fixtures.py \
        --hf4-python /tmp/venv-hf4/bin/python
    # afterwards, or on the committed files: re-encode every case with tokenizers, print counts
    /tmp/venv-ref/bin/python tests/golden/tokenizer_json/make_tokenizer_json_fixtures.py --check

It takes a few minutes on two cores (training the two sentencepiece models dominates).

The sentencepiece models are trained here on text from Debian packages (Debian 12): English from
/usr/share/common-licenses and /usr/share/doc/*/copyright, multilingual text from the translated
message catalogs /usr/share/locale/*/LC_MESSAGES/*.mo. A machine with other packages installed
trains other vocabularies, so regenerating elsewhere changes every fixture; the committed files
are the reference. Everything else (texts, pairs, truncation settings) is seeded.

Fixtures (one directory each, laid out as a checkpoint directory; README.md describes the schema):
  v3_hf5            DeBERTa-v3-style Unigram spm (nmt_nfkc, [PAD] [CLS] [SEP] [UNK] = 0..3, no
                    byte fallback) loaded by transformers 5.17 DebertaV2Tokenizer and saved
  v3_hf5_lower_punct  the same model with do_lower_case=True, split_by_punct=True
  v3_hf4            the same spm converted by transformers 4.46.3 DebertaV2TokenizerFast
                    (Precompiled charsmap normalizer; spm.model is written too)
  mdeberta          mDeBERTa-style multilingual Unigram spm, saved by transformers 5.17
Each directory has cases.jsonl.gz: the expected encodings from `tokenizers` (Tokenizer.from_file
on the directory's tokenizer.json), and whether transformers 5.17 AutoTokenizer agrees.
"""

import argparse
import gettext
import glob
import gzip
import json
import os
import random
import shutil
import subprocess
import tempfile
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 38

SPECIAL_PIECES = dict(pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]",
                      bos_piece="[CLS]", eos_piece="[SEP]", unk_piece="[UNK]")
# DeBERTa-v3's trainer settings, scaled down: Unigram, nmt_nfkc, no byte fallback, dummy prefix.
SPM_COMMON = dict(model_type="unigram", normalization_rule_name="nmt_nfkc", byte_fallback=False,
                  add_dummy_prefix=True, remove_extra_whitespaces=True, split_by_whitespace=True,
                  num_threads=1, shuffle_input_sentence=False, input_sentence_size=0,
                  minloglevel=2, **SPECIAL_PIECES)


# ---------------------------------------------------------------------------------------------
# Corpora from Debian packages.

def english_lines():
    files = sorted(glob.glob("/usr/share/common-licenses/*"))
    files += sorted(glob.glob("/usr/share/doc/*/copyright"))
    seen, lines = set(), []
    for path in files:
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if len(line) >= 2 and "\ufffd" not in line and line not in seen:
                    seen.add(line)
                    lines.append(line)
    return lines


def multilingual_lines(chars_per_language=40000):
    """Translated messages from the .mo catalogs, at most chars_per_language per language."""
    by_language = {}
    for path in sorted(glob.glob("/usr/share/locale/*/LC_MESSAGES/*.mo")):
        language = path.split("/")[4]
        try:
            with open(path, "rb") as f:
                catalog = gettext.GNUTranslations(f)._catalog
        except Exception:  # catalogs in legacy charsets or malformed: skipped
            continue
        for key, value in catalog.items():
            if key == "" or not isinstance(value, str):
                continue
            for line in value.splitlines():
                line = line.strip()
                if len(line) >= 2:
                    by_language.setdefault(language, []).append(line)
    lines = []
    for language in sorted(by_language):
        seen, kept, size = set(), [], 0
        for line in sorted(by_language[language]):
            if line in seen:
                continue
            seen.add(line)
            kept.append(line)
        random.Random(f"{SEED}-{language}").shuffle(kept)
        for line in kept:
            if size >= chars_per_language:
                break
            lines.append(line)
            size += len(line)
    return lines


def train_spm(lines, vocab_size, model_path, **extra):
    import sentencepiece as spm

    # The trainer records model_prefix in the model; a relative one keeps spm.model byte-identical
    # whatever the scratch directory is called.
    here = os.getcwd()
    os.chdir(os.path.dirname(model_path))
    try:
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines),
                                       model_prefix=os.path.basename(model_path)[:-6],
                                       vocab_size=vocab_size, **SPM_COMMON, **extra)
    finally:
        os.chdir(here)


# ---------------------------------------------------------------------------------------------
# Tokenizer directories.

def save_hf5(spm_path, out_dir, **init_kwargs):
    """What a transformers 5.17 user gets: DebertaV2Tokenizer.from_pretrained on a directory that
    holds the sentencepiece model, then save_pretrained."""
    from transformers import DebertaV2Tokenizer

    with tempfile.TemporaryDirectory() as src:
        shutil.copy(spm_path, os.path.join(src, "spm.model"))
        tok = DebertaV2Tokenizer.from_pretrained(src, **init_kwargs)
        tok.save_pretrained(out_dir)


HF4_CONVERT = r"""
import sys
from transformers import DebertaV2TokenizerFast
tok = DebertaV2TokenizerFast(vocab_file=sys.argv[1])
tok.save_pretrained(sys.argv[2])
"""


def save_hf4(hf4_python, spm_path, out_dir):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error")
    subprocess.run([hf4_python, "-c", HF4_CONVERT, spm_path, out_dir], check=True, env=env)


def reset_dir(path):
    if os.path.isdir(path):
        for name in os.listdir(path):
            os.remove(os.path.join(path, name))
    os.makedirs(path, exist_ok=True)


# ---------------------------------------------------------------------------------------------
# Texts.

SPACES = ["\u00a0", "\u1680", *[chr(c) for c in range(0x2000, 0x200B)], "\u202f", "\u205f",
          "\u3000"]
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u180e"]
CONTROLS = [chr(c) for c in range(0x00, 0x20)] + ["\x7f", "\u0085", "\u2028", "\u2029"]
BIDI = ["\u200e", "\u200f", "\u061c", *[chr(c) for c in range(0x202A, 0x202F)],
        *[chr(c) for c in range(0x2066, 0x206A)]]
LIGATURES = ["\ufb00", "\ufb01", "\ufb02", "\ufb03", "\ufb04", "\ufb05", "\ufb06", "\u0132",
             "\u01c6", "\u2122", "\u2460", "\u00bd", "\u00b2", "\u338f", "\u2163", "\u1d43",
             "\u2026", "\u2025", "\ufe59", "\u3392", "\u01c4", "\u00b5", "\u212b", "\u2126"]
COMBINING = [chr(c) for c in range(0x0300, 0x0370)] + ["\u20dd", "\u20e3", "\u1ab0", "\u0e48"]
EMOJI = ["\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F468\u200d\U0001F469\u200d\U0001F467"
         "\u200d\U0001F466", "\U0001F1EB\U0001F1F7", "\U0001F1EF\U0001F1F5",
         "\U0001F3F3\ufe0f\u200d\U0001F308", "1\ufe0f\u20e3", "\u2764\ufe0f", "\u2764\ufe0e",
         "\U0001F9D1\U0001F3FF\u200d\U0001F4BB", "\U0001F44B\U0001F3FB", "\u263a",
         "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F",
         "\U0001F937\u200d\u2642\ufe0f", "\U0001FAE0", "\u00a9\ufe0f"]
CJK = ["\u6f22\u5b57", "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3067\u3059\u3002",
       "\u4e2d\u6587\u6d4b\u8bd5\uff0c\u6807\u70b9\u7b26\u53f7\uff01", "\ud55c\uad6d\uc5b4",
       "\u30ab\u30bf\u30ab\u30ca", "\uff76\uff80\uff76\uff85", "\u3042\u3044\u3046",
       "\u1112\u1161\u11ab\u1100\u1173\u11af", "\U00020000\U0002A6D6", "\u3400\u4dbf",
       "\u3001\u3002\u300c\u300d"]
RTL = ["\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
       "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
       "\u0627\u0644\u0639\u064e\u0631\u064e\u0628\u0650\u064a\u064e\u0651\u0629",
       "\u05d1\u05bc\u05b0\u05e8\u05b5\u05d0\u05e9\u05b4\u05c1\u05d9\u05ea",
       "\u0661\u0662\u0663 \u06f4\u06f5\u06f6", "\ufdfa", "\ufb2a\ufb4f", "\ufef5"]
SPECIAL_LITERALS = ["[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "[mask]", "[Mask]", "[cls]",
                    "[MASK", "MASK]", "[[MASK]]", "[ MASK ]", "<s>", "</s>", "<pad>", "<unk>",
                    "<mask>", "\u2581", "\u2581[MASK]", "[\u2581MASK]"]
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["\u00ab", "\u00bb", "\u2014", "\u2013",
                                                       "\u201c", "\u201d", "\u00bf", "\u00a1",
                                                       "\u3002", "\uff01", "\u2026", "\u00b7"]
ODD = ["\ue000", "\uf8ff", "\U000F0000", "\U0010FFFD", "\u0378", "\u0380", "\U000E0001",
       "\ufffe", "\uffff", "\U0010FFFF", "\ufffd", "\ufdd0", "\U0001FFFE", "\u0870", "\U000E01EF"]


def fullwidth(s):
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else ("\u3000" if c == " " else c)
                   for c in s)


def random_scalar(rng):
    while True:
        c = rng.randrange(0x110000) if rng.random() < 0.3 else rng.randrange(0x3000)
        if not 0xD800 <= c <= 0xDFFF:
            return chr(c)


class TextMaker:
    def __init__(self, lines, rng):
        self.lines = lines
        self.rng = rng
        self.words = sorted({w for line in lines[:20000] for w in line.split() if len(w) < 20})

    def sentence(self, max_len=200):
        line = self.rng.choice(self.lines)
        if len(line) > max_len:
            start = self.rng.randrange(len(line) - max_len + 1)
            line = line[start:start + max_len]
        return line

    def word(self):
        return self.rng.choice(self.words)

    def some_words(self, lo=1, hi=6):
        return " ".join(self.word() for _ in range(self.rng.randint(lo, hi)))

    def insert(self, text, piece):
        at = self.rng.randrange(len(text) + 1)
        return text[:at] + piece + text[at:]

    def sprinkle(self, text, alphabet, count):
        for _ in range(count):
            text = self.insert(text, self.rng.choice(alphabet))
        return text

    def edge(self):
        """One generated edge case; the kind is chosen at random."""
        r = self.rng
        kind = r.randrange(22)
        base = self.some_words() if r.random() < 0.6 else self.sentence(120)
        if kind == 0:  # fullwidth forms, whole or part
            if r.random() < 0.5:
                return fullwidth(base)
            words = base.split(" ")
            return " ".join(fullwidth(w) if r.random() < 0.4 else w for w in words)
        if kind == 1:  # ligatures and compatibility characters
            return self.sprinkle(base.replace("fi", "\ufb01").replace("fl", "\ufb02"),
                                 LIGATURES, r.randint(0, 3))
        if kind == 2:  # other spaces in place of or next to ASCII spaces
            return "".join(r.choice(SPACES) if c == " " and r.random() < 0.6 else c
                           for c in base)
        if kind == 3:  # zero-width characters and BOM, at start and inside
            text = self.sprinkle(base, ZERO_WIDTH, r.randint(1, 4))
            return ("\ufeff" + text) if r.random() < 0.5 else text
        if kind == 4:  # control characters
            return self.sprinkle(base, CONTROLS, r.randint(1, 5))
        if kind == 5:  # decomposed (NFD / NFKD) text and stacked combining marks
            text = unicodedata.normalize(r.choice(["NFD", "NFKD"]), base)
            return self.sprinkle(text, COMBINING, r.randint(0, 6))
        if kind == 6:  # combining marks at odd places: text start, after spaces, runs
            marks = "".join(r.choice(COMBINING) for _ in range(r.randint(1, 8)))
            where = r.randrange(3)
            if where == 0:
                return marks + base
            if where == 1:
                return base.replace(" ", " " + marks, 1)
            return base + " " + marks
        if kind == 7:  # CJK, alone and mixed with Latin
            pieces = [r.choice(CJK) for _ in range(r.randint(1, 3))]
            return " ".join(pieces) if r.random() < 0.4 else self.insert(base, "".join(pieces))
        if kind == 8:  # emoji with ZWJ sequences, skin tones, flags, variation selectors
            text = base
            for _ in range(r.randint(1, 4)):
                text = self.insert(text, r.choice(EMOJI) + (" " if r.random() < 0.5 else ""))
            return text
        if kind == 9:  # RTL scripts with bidi marks
            text = r.choice(RTL)
            if r.random() < 0.6:
                text = self.sprinkle(text, BIDI, r.randint(1, 3))
            return text if r.random() < 0.4 else self.insert(base, " " + text + " ")
        if kind == 10:  # long whitespace runs
            run = "".join(r.choice([" ", " ", "\t", "\n", "\r\n", "\u3000", "\u00a0"])
                          for _ in range(r.randint(2, 200)))
            return self.insert(base, run) if r.random() < 0.8 else run
        if kind == 11:  # punctuation runs
            run = "".join(r.choice(PUNCT) for _ in range(r.randint(2, 60)))
            if r.random() < 0.3:
                run = r.choice(PUNCT) * r.randint(2, 80)
            return self.insert(base, run) if r.random() < 0.7 else run
        if kind in (12, 13):  # literal special-token strings
            lit = r.choice(SPECIAL_LITERALS)
            glue = r.choice(["", " ", "  ", "\t", "\u00a0"])
            shape = r.randrange(4)
            if shape == 0:
                return self.insert(base, glue + lit + glue)
            if shape == 1:  # inside a word
                w = self.word()
                cut = r.randrange(len(w) + 1)
                return base + " " + w[:cut] + lit + w[cut:]
            if shape == 2:
                return lit
            return glue.join(r.choice(SPECIAL_LITERALS) for _ in range(r.randint(2, 5)))
        if kind == 14:  # private use, unassigned, noncharacters
            return self.sprinkle(base, ODD, r.randint(1, 4))
        if kind == 15:  # random scalar values
            return "".join(random_scalar(r) for _ in range(r.randint(1, 40)))
        if kind == 16:  # digits, numbers with separators
            return self.insert(base, r.choice(["123456789", "3.14159", "1,000,000", "2024-01-31",
                                               "\uff11\uff12\uff13", "\u0968\u0966\u0968",
                                               "0x7FFF", "1e-7"]))
        if kind == 17:  # case variants
            return r.choice([base.upper(), base.title(), base.swapcase(),
                             "\u0130stanbul \u0049\u0131 \u00df\u1e9e \u03a3\u03c3\u03c2"])
        if kind == 18:  # leading and trailing whitespace of all kinds
            lead = "".join(r.choice(SPACES + [" ", "\t", "\n"]) for _ in range(r.randint(0, 4)))
            tail = "".join(r.choice(SPACES + [" ", "\t", "\n"]) for _ in range(r.randint(0, 4)))
            return lead + base + tail
        if kind == 19:  # a mix of everything
            text = base
            for alphabet in r.sample([SPACES, ZERO_WIDTH, CONTROLS, COMBINING, EMOJI, LIGATURES,
                                      PUNCT, SPECIAL_LITERALS, ODD, BIDI], 4):
                text = self.sprinkle(text, alphabet, 1)
            return text
        if kind == 20:  # very long texts, to exercise truncation
            parts = [self.sentence(120) for _ in range(r.randint(3, 6))]
            return " ".join(parts)
        return self.sentence(r.choice([20, 60, 160, 300]))  # natural text

    def fixed(self):
        """Hand-picked texts that every fixture carries."""
        texts = ["", " ", "  ", "     ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\ufeff",
                 "\ufeff\ufeff", "\u200b", "\x00", "a", "A", ".", "...", "[CLS]", "[SEP]",
                 "[MASK]", "[PAD]", "[UNK]", " [MASK] ", "[MASK][MASK]", "a[MASK]b", "[mask]",
                 "\u2581", "\u2581\u2581", " \u2581 ", "\ufb01", "\ufb01nance", "\uff21\uff22",
                 "e\u0301", "\u00e9", "\u0301", "\U0001F600", "\u200d", "\ufeffHello",
                 "Hello\ufeffworld", "Hello world", "hello  world", "hello \u00a0 world",
                 "end.   ", "   start", "\u0645\u0631\u062d\u0628\u0627", "\u6f22\u5b57",
                 "\ue000", "\u0378", "\x7f", "\u0085", "a\u0085b", "\r", "a\rb", "a\tb",
                 "a\nb", "a\x00b", "\u2028", "x\u2029y", "\u0130", "\u1e9e", "\u00df",
                 "[CLS] [SEP]", "[SEP]hello[SEP]", "\U0001F1EB\U0001F1F7", "1\ufe0f\u20e3",
                 "\u3000\u3000x\u3000\u3000", "a" * 300, "ab " * 200, "!" * 100,
                 " " * 100 + "x", "x" + " " * 100]
        return texts


def make_texts(lines, count, seed):
    rng = random.Random(seed)
    maker = TextMaker(lines, rng)
    seen, texts = set(), []
    for t in maker.fixed():
        if t not in seen:
            seen.add(t)
            texts.append(t)
    while len(texts) < count:
        t = maker.edge() if rng.random() < 0.65 else maker.sentence(rng.choice([20, 60, 120]))
        if t not in seen:
            seen.add(t)
            texts.append(t)
    return texts


# ---------------------------------------------------------------------------------------------
# Cases and expected encodings.

STRATEGIES = ["longest_first", "only_first", "only_second", "do_not_truncate"]
MAX_LENGTHS = [0, 1, 2, 3, 4, 5, 6, 8, 11, 16, 32, 64, 128]


def make_cases(texts, seed, pairs, truncated_singles, truncated_pairs, no_specials):
    rng = random.Random(seed)
    cases = [dict(text=t) for t in texts]
    # Long texts make truncation bite; short ones make it impossible or a no-op.
    by_length = sorted(texts, key=len)
    long_texts = by_length[-len(texts) // 5:]

    def pick():
        return rng.choice(long_texts) if rng.random() < 0.15 else rng.choice(texts)

    fixed_pairs = [("", ""), ("a", ""), ("", "a"), (" ", " "), ("[SEP]", "[CLS]"),
                   ("Hello world", "\ufeff"), ("\u3000", "x y")]
    for text, pair in fixed_pairs:
        cases.append(dict(text=text, pair=pair))
        for strategy in STRATEGIES:
            cases.append(dict(text=text, pair=pair,
                              truncation=dict(strategy=strategy, max_length=3, side="right")))
    for _ in range(pairs):
        cases.append(dict(text=pick(), pair=pick()))
    for i in range(truncated_singles + truncated_pairs):
        case = dict(text=pick())
        if i >= truncated_singles:
            case["pair"] = pick()
        case["truncation"] = dict(strategy=STRATEGIES[i % 4], max_length=rng.choice(MAX_LENGTHS),
                                  side=rng.choice(["right", "left"]))
        cases.append(case)
    for _ in range(no_specials):
        case = dict(text=pick(), add_special_tokens=False)
        if rng.random() < 0.5:
            case["pair"] = pick()
        cases.append(case)
    return cases


def byte_offsets(text, offsets):
    """Character offsets of `text` turned into UTF-8 byte offsets."""
    prefix = [0]
    for c in text:
        prefix.append(prefix[-1] + len(c.encode("utf-8")))
    return [[prefix[s], prefix[e]] for s, e in offsets]


def encode_tokenizers(tok, case):
    trunc = case.get("truncation")
    if trunc is None or trunc["strategy"] == "do_not_truncate":
        tok.no_truncation()
    else:
        tok.enable_truncation(trunc["max_length"], stride=0, strategy=trunc["strategy"],
                              direction=trunc["side"])
    try:
        enc = tok.encode(case["text"], case.get("pair"),
                         add_special_tokens=case.get("add_special_tokens", True))
    except Exception as e:  # noqa: BLE001 - the library's error is the expected result
        return dict(error=str(e))
    return dict(input_ids=enc.ids, token_type_ids=enc.type_ids,
                offsets=[list(o) for o in enc.offsets],
                special_tokens_mask=enc.special_tokens_mask)


def encode_transformers(tok, case):
    trunc = case.get("truncation")
    kwargs = dict(add_special_tokens=case.get("add_special_tokens", True),
                  return_offsets_mapping=True, return_special_tokens_mask=True,
                  return_token_type_ids=True, return_attention_mask=False)
    if trunc is not None:
        tok.truncation_side = trunc["side"]
        kwargs.update(truncation=trunc["strategy"] if trunc["strategy"] != "do_not_truncate"
                      else False, max_length=trunc["max_length"])
    else:
        tok.truncation_side = "right"
    try:
        enc = tok(case["text"], case.get("pair"), **kwargs)
    except Exception as e:  # noqa: BLE001
        return dict(error=f"{type(e).__name__}: {e}")
    return dict(input_ids=list(enc["input_ids"]), token_type_ids=list(enc["token_type_ids"]),
                offsets=[list(o) for o in enc["offset_mapping"]],
                special_tokens_mask=list(enc["special_tokens_mask"]))


def write_cases(fixture_dir, cases):
    import transformers
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    transformers.logging.set_verbosity_error()
    rust = Tokenizer.from_file(os.path.join(fixture_dir, "tokenizer.json"))
    hf = AutoTokenizer.from_pretrained(fixture_dir)
    stats = dict(cases=0, texts=0, pairs=0, truncation=0, errors=0, no_special_tokens=0,
                 disagreements=0, disagreement_errors=0)
    examples = []
    out_path = os.path.join(fixture_dir, "cases.jsonl.gz")
    texts = set()
    with gzip.GzipFile(out_path, "wb", mtime=0) as raw:
        for i, case in enumerate(cases):
            expected = encode_tokenizers(rust, case)
            other = encode_transformers(hf, case)
            record = dict(id=i, **case)
            if "error" in expected:
                record["error"] = expected["error"]
                stats["errors"] += 1
                agrees = "error" in other
            else:
                record.update(expected)
                in_bytes = byte_offsets_for(case, expected)
                if in_bytes != expected["offsets"]:
                    record["byte_offsets"] = in_bytes
                agrees = other == expected
            record["transformers_agrees"] = agrees
            if not agrees:
                record["transformers"] = other
                stats["disagreements"] += 1
                if "error" in other or "error" in expected:
                    stats["disagreement_errors"] += 1
                if len(examples) < 8:
                    examples.append(record)
            stats["cases"] += 1
            texts.add(case["text"])
            if "pair" in case:
                stats["pairs"] += 1
                texts.add(case["pair"])
            if "truncation" in case:
                stats["truncation"] += 1
            if case.get("add_special_tokens") is False:
                stats["no_special_tokens"] += 1
            line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
            raw.write((line + "\n").encode("utf-8"))
    stats["texts"] = len(texts)
    return stats, examples


def byte_offsets_for(case, expected):
    """Byte offsets: a token of the second sequence (type id 1 outside special tokens) points into
    the pair text, any other into the first text."""
    result = []
    for (s, e), type_id, special in zip(expected["offsets"], expected["token_type_ids"],
                                        expected["special_tokens_mask"]):
        if special:
            result.append([s, e])
            continue
        text = case["pair"] if type_id == 1 and "pair" in case else case["text"]
        result.extend(byte_offsets(text, [(s, e)]))
    return result


def check_fixture(fixture_dir):
    """Reads cases.jsonl.gz back and encodes every case again with `tokenizers`; returns counts."""
    from tokenizers import Tokenizer

    rust = Tokenizer.from_file(os.path.join(fixture_dir, "tokenizer.json"))
    counts = dict(cases=0, texts=0, pair_cases=0, truncation_cases=0, error_cases=0,
                  transformers_disagrees=0)
    texts = set()
    with gzip.open(os.path.join(fixture_dir, "cases.jsonl.gz"), "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            record = json.loads(line)
            assert record["id"] == i, (fixture_dir, i)
            case = {k: record[k] for k in ("text", "pair", "truncation", "add_special_tokens")
                    if k in record}
            expected = encode_tokenizers(rust, case)
            if "error" in expected:
                assert record.get("error") == expected["error"], (fixture_dir, i)
            else:
                for key in ("input_ids", "token_type_ids", "offsets", "special_tokens_mask"):
                    assert record[key] == expected[key], (fixture_dir, i, key)
                in_bytes = record.get("byte_offsets", record["offsets"])
                assert in_bytes == byte_offsets_for(case, expected), (fixture_dir, i)
            counts["cases"] += 1
            texts.add(record["text"])
            if "pair" in record:
                counts["pair_cases"] += 1
                texts.add(record["pair"])
            counts["truncation_cases"] += "truncation" in record
            counts["error_cases"] += "error" in record
            counts["transformers_disagrees"] += not record["transformers_agrees"]
    counts["texts"] = len(texts)
    return counts


# ---------------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=HERE)
    parser.add_argument("--hf4-python", help="python of the transformers 4.46.3 environment")
    parser.add_argument("--only", nargs="*", help="fixture names to build (default: all)")
    parser.add_argument("--texts", type=int, default=5200)
    parser.add_argument("--check", action="store_true",
                        help="only re-encode the committed cases with tokenizers and count them")
    args = parser.parse_args()
    if args.check:
        for name in sorted(os.listdir(args.out)):
            if os.path.isfile(os.path.join(args.out, name, "cases.jsonl.gz")):
                print(name, json.dumps(check_fixture(os.path.join(args.out, name))))
        return

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = tempfile.mkdtemp(prefix="tokjson-")
    try:
        english = english_lines()
        multi = multilingual_lines()
        print(f"corpus: {len(english)} English lines, {len(multi)} multilingual lines")
        v3_spm = os.path.join(work, "v3.model")
        m_spm = os.path.join(work, "mdeberta.model")
        wanted = set(args.only or ["v3_hf5", "v3_hf5_lower_punct", "v3_hf4", "mdeberta"])
        if "v3_hf4" in wanted and not args.hf4_python:
            parser.error("v3_hf4 needs --hf4-python")
        if wanted & {"v3_hf5", "v3_hf5_lower_punct", "v3_hf4"}:
            train_spm(english, 6000, v3_spm, character_coverage=0.9995)
        if "mdeberta" in wanted:
            train_spm(multi, 8000, m_spm, character_coverage=0.9995)
        full = dict(texts=args.texts, pairs=2000, truncated_singles=500, truncated_pairs=1000,
                    no_specials=100)
        # The variant shares v3_hf5's vocabulary; fewer cases keep the repository small.
        small = dict(texts=1500, pairs=400, truncated_singles=200, truncated_pairs=400,
                     no_specials=50)
        fixtures = [
            ("v3_hf5", lambda d: save_hf5(v3_spm, d), english, full),
            ("v3_hf5_lower_punct",
             lambda d: save_hf5(v3_spm, d, do_lower_case=True, split_by_punct=True), english,
             small),
            ("v3_hf4", lambda d: save_hf4(args.hf4_python, v3_spm, d), english, full),
            ("mdeberta", lambda d: save_hf5(m_spm, d), multi, full),
        ]
        all_stats = {}
        for name, save, lines, sizes in fixtures:
            if name not in wanted:
                continue
            fixture_dir = os.path.join(args.out, name)
            reset_dir(fixture_dir)
            save(fixture_dir)
            sizes = dict(sizes)
            texts = make_texts(lines, sizes.pop("texts"), f"{SEED}-{name}-texts")
            cases = make_cases(texts, f"{SEED}-{name}-cases", **sizes)
            stats, examples = write_cases(fixture_dir, cases)
            all_stats[name] = stats
            print(name, json.dumps(stats))
            for ex in examples:
                print("  disagreement:", json.dumps(ex, ensure_ascii=True)[:600])
        print(json.dumps(all_stats, indent=1))
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
