#!/usr/bin/env python3
"""Builds decode_cases.json: the texts that the `tokenizers` library (tokenizer.json) and the
sentencepiece module (spm.model) decode ids of the committed fixtures to (/decode parity).

Run from the repository root (never at test time), in the reference environment that
make_tokenizer_json_fixtures.py describes (tokenizers 0.23.3, sentencepiece 0.2.3):

    /tmp/venv-ref/bin/python tests/golden/tokenizer_json/make_decode_fixtures.py

Cases, for every fixture directory's tokenizer.json: the ids of a few texts as `tokenizers`
encodes them (with [CLS]/[SEP]), the same without the first token, and seeded random id lists
over the whole vocabulary (added tokens included); each with skip_special_tokens true and false.
Expected: Tokenizer.decode. Ids tokenizers does not know are not generated (the server refuses
them). For spm.model (v3_hf4), the same id lists with the rule of DebertaTokenizer::Decode:
runs of pieces between added tokens decoded by SentencePieceProcessor.decode, added tokens
written as their text (special ones left out when skipping), a run after written text
preceded by one space when its first piece starts with U+2581.
"""

import json
import pathlib
import random

import sentencepiece
import tokenizers

HERE = pathlib.Path(__file__).resolve().parent
FIXTURES = ["v3_hf5", "v3_hf5_lower_punct", "v3_hf4", "mdeberta"]
TEXTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "  leading and trailing spaces  ",
    "multiple   spaces\tand\nnewlines",
    "Punctuation: (a), [b]; {c}! ¿Qué? «ok»",
    "Café naïve résumé",
    "日本語のテキストと中文",
    "emoji 😀 and 👍🏽 here",
    "a [MASK] in the middle[SEP]and after",
    "numbers 3.14159 and 1,000,000",
    "Ünïcödé Straße ΑΒΓ Привет",
    "",
]
RANDOM_LISTS = 12
MAX_RANDOM_LENGTH = 24


def random_lists(rng, vocab_size, added_ids):
    lists = []
    for _ in range(RANDOM_LISTS):
        length = rng.randint(1, MAX_RANDOM_LENGTH)
        ids = [rng.randrange(vocab_size) for _ in range(length)]
        # Added tokens at random places, so that runs around them are covered.
        for _ in range(rng.randint(0, 3)):
            ids.insert(rng.randint(0, len(ids)), rng.choice(added_ids))
        lists.append(ids)
    return lists


def spm_decode(processor, added, special, ids, skip):
    text = ""
    run = []

    def flush():
        nonlocal text, run
        if not run:
            return
        if text and processor.id_to_piece(run[0]).startswith("\u2581"):
            text += " "
        text += processor.decode(run)
        run = []

    for token_id in ids:
        if token_id not in added:
            run.append(token_id)
            continue
        if skip and token_id in special:
            continue
        flush()
        text += added[token_id]
    flush()
    return text


def main():
    rng = random.Random(20261205)
    out = {"tokenizers": tokenizers.__version__, "sentencepiece": sentencepiece.__version__,
           "fixtures": {}}
    id_lists = {}
    for name in FIXTURES:
        tokenizer = tokenizers.Tokenizer.from_file(str(HERE / name / "tokenizer.json"))
        added = {token.content: token_id
                 for token_id, token in tokenizer.get_added_tokens_decoder().items()}
        vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        lists = []
        for text in TEXTS:
            ids = tokenizer.encode(text).ids
            lists.append(ids)
            if len(ids) > 1:
                lists.append(ids[1:])
        lists += random_lists(rng, vocab_size, sorted(added.values()))
        id_lists[name] = lists
        cases = []
        for ids in lists:
            for skip in (True, False):
                cases.append({"ids": ids, "skip_special_tokens": skip,
                              "text": tokenizer.decode(ids, skip_special_tokens=skip)})
        out["fixtures"][name] = cases

    processor = sentencepiece.SentencePieceProcessor(model_file=str(HERE / "v3_hf4" / "spm.model"))
    added = {0: "[PAD]", 1: "[CLS]", 2: "[SEP]", 3: "[UNK]", 6000: "[MASK]"}
    special = set(added)
    cases = []
    for ids in id_lists["v3_hf4"]:
        for skip in (True, False):
            cases.append({"ids": ids, "skip_special_tokens": skip,
                          "text": spm_decode(processor, added, special, ids, skip)})
    out["spm_v3_hf4"] = cases
    (HERE / "decode_cases.json").write_text(json.dumps(out, ensure_ascii=False, indent=0) + "\n")


if __name__ == "__main__":
    main()
