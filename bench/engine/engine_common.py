"""Shared parts of the bench/engine scripts: the public DeBERTa shapes, the MNLI-like length mix,
padded batches, and the raw float32 / hidden-state file formats that the C++ bench also writes.

Only the standard library, numpy and (lazily) torch: the GPU host needs nothing else.
"""
import json
import sys

import numpy as np

CLS_ID = 1
SEP_ID = 2
# DeBERTa-v3's 128,000 sentencepiece pieces: 0..3 are [PAD] [CLS] [SEP] [UNK], 128000 is [MASK]
# (docs/deberta.md#vocabulary-and-special-ids); ordinary pieces are 4..127999.
FIRST_PIECE_ID = 4
LAST_PIECE_ID = 127999
MAX_LENGTH = 512

# docs/deberta.md#public-checkpoints: fields shared by every public DeBERTa-v3 and
# v2-xlarge/xxlarge config.
PUBLIC_COMMON = dict(
    model_type="deberta-v2", vocab_size=128100, hidden_act="gelu", hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=0,
    initializer_range=0.02, layer_norm_eps=1e-7, relative_attention=True, max_relative_positions=-1,
    position_buckets=256, pad_token_id=0, position_biased_input=False,
    pos_att_type=["p2c", "c2p"], share_att_key=True, norm_rel_ebd="layer_norm",
    pooler_hidden_act="gelu", pooler_dropout=0)

SHAPES = {
    "v3-base": dict(PUBLIC_COMMON, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                    intermediate_size=3072, pooler_hidden_size=768),
    "v3-large": dict(PUBLIC_COMMON, hidden_size=1024, num_hidden_layers=24,
                     num_attention_heads=16, intermediate_size=4096, pooler_hidden_size=1024),
    # v2 writes pos_att_type as a string and sets the head size explicitly.
    "v2-xlarge": dict(PUBLIC_COMMON, hidden_size=1536, num_hidden_layers=24,
                      num_attention_heads=24, intermediate_size=6144, pooler_hidden_size=1536,
                      attention_head_size=64, pos_att_type="p2c|c2p", conv_kernel_size=3,
                      conv_act="gelu", conv_groups=1),
    # For local tests: v3 fields and vocabulary (so the same pair files apply), head size 64,
    # 2 layers of width 128.
    "tiny": dict(PUBLIC_COMMON, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=512, pooler_hidden_size=128),
}

# docs/deberta.md#mnli-like-pairs: MNLI matched-validation pair mix. Words per premise /
# hypothesis are lognormal (median, sigma) clipped to [min, max]; pieces per word is tuned so the
# pair lengths land on the target figures (mean 44, p99 ~103, max ~182 tokens).
MNLI_PREMISE_WORDS = dict(median=19.0, sigma=0.55, min=3, max=200)
MNLI_HYPOTHESIS_WORDS = dict(median=10.0, sigma=0.40, min=2, max=60)
MNLI_PIECES_PER_WORD = 1.25


def log(message):
    print(message, file=sys.stderr, flush=True)


def _words(rng, spec):
    value = rng.lognormal(np.log(spec["median"]), spec["sigma"])
    return int(np.clip(round(value), spec["min"], spec["max"]))


def _pieces(rng, words, pieces_per_word):
    # Each word is one piece plus a Poisson number of extra sub-pieces (mean pieces_per_word - 1).
    return words + int(rng.poisson((pieces_per_word - 1.0) * words))


def mnli_like_pairs(count, seed, pieces_per_word=MNLI_PIECES_PER_WORD):
    """Token-id sequences [CLS] premise [SEP] hypothesis [SEP], longest_first-truncated to 512."""
    rng = np.random.default_rng(seed)
    sequences = []
    budget = MAX_LENGTH - 3
    for _ in range(count):
        a = _pieces(rng, _words(rng, MNLI_PREMISE_WORDS), pieces_per_word)
        b = _pieces(rng, _words(rng, MNLI_HYPOTHESIS_WORDS), pieces_per_word)
        if a + b > budget:  # the Rust longest_first rule (docs/deberta.md#truncation)
            short, long_ = min(a, b), max(a, b)
            if short > budget // 2:
                short, long_ = budget // 2, budget - budget // 2
            else:
                long_ = budget - short
            a, b = (long_, short) if a >= b else (short, long_)
        premise = rng.integers(FIRST_PIECE_ID, LAST_PIECE_ID + 1, size=a).tolist()
        hypothesis = rng.integers(FIRST_PIECE_ID, LAST_PIECE_ID + 1, size=b).tolist()
        sequences.append([CLS_ID] + premise + [SEP_ID] + hypothesis + [SEP_ID])
    return sequences


def length_stats(sequences):
    lengths = np.array([len(s) for s in sequences])
    return {"pairs": int(lengths.size), "tokens": int(lengths.sum()),
            "mean": round(float(lengths.mean()), 2), "median": float(np.median(lengths)),
            "p90": float(np.percentile(lengths, 90)), "p99": float(np.percentile(lengths, 99)),
            "max": int(lengths.max()), "min": int(lengths.min())}


def read_pairs(path):
    with open(path) as f:
        return [json.loads(line)["ids"] for line in f if line.strip()]


def write_pairs(path, sequences):
    with open(path, "w") as f:
        for ids in sequences:
            f.write(json.dumps({"ids": ids}, separators=(",", ":")) + "\n")


def pad_batch(sequences, device):
    """Right-padded input_ids (pad 0) and attention_mask for a list of id lists."""
    import torch
    longest = max(len(s) for s in sequences)
    ids = torch.zeros(len(sequences), longest, dtype=torch.long)
    mask = torch.zeros(len(sequences), longest, dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, :len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[row, :len(seq)] = 1
    return ids.to(device, non_blocking=True), mask.to(device, non_blocking=True)


# Raw arrays: little-endian float32, row-major, no header (the C++ bench writes the same).
def write_f32(path, array):
    np.ascontiguousarray(array, dtype="<f4").tofile(path)


def read_f32(path, columns):
    values = np.fromfile(path, dtype="<f4")
    if values.size % columns:
        raise ValueError(f"{path}: {values.size} floats is not a multiple of {columns} columns")
    return values.reshape(-1, columns)


# Hidden states of a few sequences: their valid rows concatenated, [sum(lengths), hidden], with
# an index PREFIX.hidden.json {"pairs", "lengths", "offsets" (rows), "hidden_size"}.
def hidden_index_path(prefix):
    return prefix + ".hidden.json"


def write_hidden_index(prefix, pairs, lengths, hidden_size):
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(int).tolist()
    with open(hidden_index_path(prefix), "w") as f:
        json.dump({"pairs": list(pairs), "lengths": list(lengths), "offsets": offsets,
                   "hidden_size": hidden_size, "dtype": "float32 little-endian, row-major"},
                  f, indent=1)


def read_hidden_index(prefix):
    with open(hidden_index_path(prefix)) as f:
        return json.load(f)


def relative_errors(test, reference):
    """Relative L2 of test against reference over the whole array, the worst row's relative L2,
    and the largest absolute difference."""
    test = np.asarray(test, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if test.shape != reference.shape:
        raise ValueError(f"shape {test.shape} against reference {reference.shape}")
    diff = test - reference
    row_norm = np.maximum(np.linalg.norm(reference, axis=1), 1e-30)
    return {"rel_l2": float(np.linalg.norm(diff) / max(np.linalg.norm(reference), 1e-30)),
            "max_row_rel_l2": float((np.linalg.norm(diff, axis=1) / row_norm).max()),
            "max_abs": float(np.abs(diff).max())}
