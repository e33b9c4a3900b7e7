#!/usr/bin/env python3
"""Builds the token-classification golden fixture: a random-weight
DebertaV2ForTokenClassification with BIO labels over the tokenizer of tests/golden/tokenizer
(spm.model, 4000 pieces, plus [MASK]) and the answers of transformers' TokenClassificationPipeline
for every aggregation strategy, which TokenClassify must reproduce.

Run from the repository root (transformers 5.17, torch 2.11, sentencepiece; never at test time):

    python3 tests/golden/make_token_goldens.py --out tests/golden/models/ner

Writes config.json, model.safetensors (float16), tokenizer_config.json and pipeline_goldens.json;
a served model directory is these plus tests/golden/tokenizer/spm.model, which the tests copy in.

Random weights give near-uniform label scores, so the classifier's weights are scaled up and the
seed is searched (deterministically, from --seed) until the answers have what the test needs:
groups of several tokens under every strategy, labelled tokens at both edges of a text, and a
clear winner for every decision (top label ahead of the next by at least MARGIN in probability,
for tokens and for averaged words), so float32 rounding in another engine cannot flip a label.
Texts are ones on which our tokenizer and transformers' agree (ASCII, NFC accents, CJK, pieces of
multi-piece words; no runs of whitespace, tabs or full-width forms).
"""
import argparse
import json
import os
import shutil
import warnings

import numpy as np
import safetensors.torch
import sentencepiece
import torch
import transformers
from transformers import (AddedToken, DebertaV2Config, DebertaV2ForTokenClassification,
                          DebertaV2Tokenizer, pipeline)

HERE = os.path.dirname(os.path.abspath(__file__))
SPM_PATH = os.path.join(HERE, "tokenizer", "spm.model")
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
STRATEGIES = ["none", "simple", "first", "average", "max"]
MARGIN = 2e-3
TEXTS = [
    "Ada Lovelace met Charles Babbage in London.",
    "Paris",
    "The unbelievably long conference in Amsterdam ended with Microsoft's keynote",
    "José Müller visited Zürich and São Paulo last year.",
    "東京 and 北京 are large cities, said Mr. Tanaka",
    "Wikipedia was founded by Jimmy Wales and Larry Sanger",
    "Deutsche Bank",
]
CONFIG = dict(vocab_size=4001, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
              intermediate_size=64, hidden_act="gelu", layer_norm_eps=1e-7, pad_token_id=0,
              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
              relative_attention=True, position_buckets=16, max_relative_positions=64,
              pos_att_type="p2c|c2p", share_att_key=True, norm_rel_ebd="layer_norm",
              position_biased_input=False, type_vocab_size=0, max_position_embeddings=512)
TOKENIZER_CONFIG = {
    "add_prefix_space": True, "backend": "tokenizers", "bos_token": "[CLS]", "cls_token": "[CLS]",
    "do_lower_case": False, "eos_token": "[SEP]", "mask_token": "[MASK]",
    "model_max_length": 512, "pad_token": "[PAD]", "sep_token": "[SEP]", "split_by_punct": False,
    "tokenizer_class": "DebertaV2Tokenizer", "unk_token": "[UNK]", "vocab_type": "spm",
}


def hf_tokenizer():
    """DebertaV2Tokenizer as from_pretrained builds it from spm.model (as the tokenizer goldens
    build it: the extractor needs the protobuf package)."""
    sp = sentencepiece.SentencePieceProcessor(model_file=SPM_PATH)
    vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    specials = [AddedToken(sp.id_to_piece(i), normalized=False, special=True)
                for i in range(sp.get_piece_size()) if sp.is_control(i)]
    return DebertaV2Tokenizer(vocab=vocab, unk_id=sp.unk_id(), additional_special_tokens=specials,
                              do_lower_case=False, split_by_punct=False, model_max_length=512)


def make_model(seed):
    config = DebertaV2Config(**CONFIG, num_labels=len(LABELS),
                             id2label=dict(enumerate(LABELS)),
                             label2id={name: i for i, name in enumerate(LABELS)})
    model = DebertaV2ForTokenClassification(config).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator, dtype=torch.float64)
            param.copy_(1.0 + 0.1 * noise if name.endswith("LayerNorm.weight") else 0.1 * noise)
        # Decisive, varied labels: logits of a few units instead of a few tenths.
        model.classifier.weight.mul_(12.0)
        model.classifier.bias.mul_(10.0)
        model.classifier.bias[0] += 8.0  # "O" for about half of the tokens.
        for param in model.parameters():  # The stored (float16) values are the reference's.
            param.copy_(param.to(torch.float16).to(torch.float32))
    return model


def run_pipelines(model, tokenizer):
    answers = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for strategy in STRATEGIES:
            ner = pipeline("token-classification", model=model, tokenizer=tokenizer,
                           aggregation_strategy=strategy, device="cpu")
            answers[strategy] = [ner(text) for text in TEXTS]
    return answers


def words(text, offsets, ids, unk_id):
    """[first, last) token ranges of the pipeline's words (its heuristic for sentencepiece)."""
    ranges = []
    for t, ((start, _), token) in enumerate(zip(offsets, ids)):
        subword = start > 0 and " " not in text[start - 1:start + 1] and token != unk_id
        if ranges and subword:
            ranges[-1][1] = t + 1
        else:
            ranges.append([t, t + 1])
    return ranges


def margins(model, tokenizer):
    """The smallest lead of the top label over the next: per token, and per word's mean."""
    worst = 1.0
    for text in TEXTS:
        encoded = tokenizer(text, return_tensors="pt", return_offsets_mapping=True)
        offsets = encoded.pop("offset_mapping")[0].tolist()[1:-1]
        ids = encoded["input_ids"][0].tolist()[1:-1]
        with torch.no_grad():
            probs = torch.softmax(model(**encoded).logits[0].double(), -1)[1:-1]
        top2 = probs.topk(2, -1).values
        worst = min(worst, float((top2[:, 0] - top2[:, 1]).min()))
        for first, last in words(text, offsets, ids, tokenizer.unk_token_id):
            mean = probs[first:last].mean(0).topk(2).values
            worst = min(worst, float(mean[0] - mean[1]))
    return worst


def tokens_in(text, tokenizer, start, end):
    offsets = tokenizer(text, return_offsets_mapping=True)["offset_mapping"][1:-1]
    return sum(1 for b, e in offsets if start <= b and e <= end and e > b)


def good_enough(answers, tokenizer):
    """Multi-token groups under every grouping strategy, entities at both edges of a text."""
    for strategy in STRATEGIES[1:]:
        if not any(tokens_in(text, tokenizer, e["start"], e["end"]) >= 2
                   for text, entities in zip(TEXTS, answers[strategy]) for e in entities):
            return False
    none = answers["none"]
    at_start = any(entities and entities[0]["start"] == 0 for entities in none)
    at_end = any(entities and entities[-1]["end"] == len(text)
                 for text, entities in zip(TEXTS, none))
    return at_start and at_end


def to_json(text, entity):
    out = {key: entity[key] for key in ("word", "start", "end")}
    out["score"] = float(entity["score"])
    out["label"] = entity.get("entity", entity.get("entity_group"))
    if "index" in entity:
        out["index"] = int(entity["index"])
    out["start_byte"] = len(text[:entity["start"]].encode())
    out["end_byte"] = len(text[:entity["end"]].encode())
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="output folder (tests/golden/models/ner)")
    parser.add_argument("--seed", type=int, default=38)
    args = parser.parse_args()
    tokenizer = hf_tokenizer()
    for seed in range(args.seed, args.seed + 200):
        model = make_model(seed)
        answers = run_pipelines(model, tokenizer)
        margin = margins(model, tokenizer)
        if margin >= MARGIN and good_enough(answers, tokenizer):
            break
    else:
        raise SystemExit("no seed in range gives a usable fixture")

    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    model.save_pretrained(args.out, safe_serialization=True)
    state = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
    safetensors.torch.save_file(state, os.path.join(args.out, "model.safetensors"),
                                metadata={"format": "pt"})
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(args.out, extra)):
            os.remove(os.path.join(args.out, extra))
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump(TOKENIZER_CONFIG, f, indent=2, sort_keys=True)
    cases = []
    for i, text in enumerate(TEXTS):
        ids = tokenizer(text)["input_ids"]
        cases.append({"text": text, "input_ids": ids,
                      "answers": {s: [to_json(text, e) for e in answers[s][i]]
                                  for s in STRATEGIES}})
    golden = {"transformers": transformers.__version__, "torch": torch.__version__,
              "seed": seed, "labels": LABELS, "min_margin": margin, "cases": cases}
    with open(os.path.join(args.out, "pipeline_goldens.json"), "w") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
    counts = {s: sum(len(c["answers"][s]) for c in cases) for s in STRATEGIES}
    print(f"seed {seed}, min margin {margin:.2e}, entities per strategy {counts}")


if __name__ == "__main__":
    main()
