#!/usr/bin/env python3
"""Writes a deterministic MNLI-like set of token-id pairs for the engine benchmark.

Each line of FILE is one JSON object {"ids": [...]}: [CLS]=1, premise ids, [SEP]=2, hypothesis
ids, [SEP]=2, with ids drawn uniformly from DeBERTa-v3's ordinary pieces (4..127999) and no token
types (type_vocab_size is 0). Lengths follow docs/deberta.md#mnli-like-pairs: premise words ~
lognormal(ln 19, 0.55) clipped to [3, 200], hypothesis words ~ lognormal(ln 10, 0.40) clipped to
[2, 60], 1.25 pieces per word, longest_first truncation at 512. With the defaults (9,815 pairs,
seed 0): mean 44.3, median 41, p99 103, max 171 tokens. The statistics go to stderr.

    python3 bench/engine/mnli_like_pairs.py --out /tmp/dfe/mnli_like.jsonl --pairs 9815 --seed 0
"""
import argparse
import json

import engine_common as common


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="JSON Lines file to write")
    parser.add_argument("--pairs", type=int, default=9815)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pieces-per-word", type=float, default=common.MNLI_PIECES_PER_WORD)
    args = parser.parse_args()
    sequences = common.mnli_like_pairs(args.pairs, args.seed, args.pieces_per_word)
    common.write_pairs(args.out, sequences)
    common.log(f"{args.out}: " + json.dumps(common.length_stats(sequences)))


if __name__ == "__main__":
    main()
