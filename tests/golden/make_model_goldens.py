#!/usr/bin/env python3
"""Builds the golden DeBERTa-v2/v3 fixtures that the C++ engine is checked against.

Each family is a random-weight checkpoint made by Hugging Face transformers, saved in the
directory layout the service loads (config.json + safetensors), with reference outputs computed by
transformers itself in float32 on the CPU (TF32 cannot apply there) and in float64 for scale.

Run (transformers 5.17, torch 2.11; a GPU host with them, or a venv with
`pip install torch==2.11.0 transformers==5.17.0 safetensors numpy`):

    python3 tests/golden/make_model_goldens.py --out tests/golden/models

Families (docs/deberta.md#precision-and-tolerances lists what each exercises):
  v3_like          log buckets, share_att_key, LayerNorm on rel. embeddings, c2p+p2c (F32 file)
  v2_xlarge_like   as v3_like plus the ConvLayer (kernel 3, gelu); max_relative_positions
                   falls back to max_position_embeddings (F16 file)
  legacy           no buckets, separate pos_key_proj/pos_query_proj, absolute positions, token
                   types, embed_proj 48 -> 64, no "deberta." prefix and gamma/beta LayerNorm
                   names (BF16 file)
  c2p_only         c2p only, buckets 8 / max_relative_positions 32, ConvLayer(tanh, 2 groups),
                   one regression label (F32 file)
  token_cls        DebertaV2ForTokenClassification, 5 labels, sharded safetensors with an index
  encoder_only     DebertaV2Model; mean and CLS sentence embeddings from its hidden states
  mdeberta_v3_like mDeBERTa-v3's shape: vocabulary 250,002, position_buckets 256,
                   max_relative_positions -1, 3 labels (F16 file). Tiny otherwise: hidden 32 in one
                   head (the CUDA engine's smallest head size) and word embeddings of width 4
                   projected to it (embed_proj), so the 250,002-row table takes 2 MB; rows outside
                   the ids the inputs use are zero, which git stores compressed
Sequence lengths include 1, 2, short ones, text pairs with token types, and ones longer than
2 x position_buckets (and past max_relative_positions) so that bucket saturation is exercised.
"""
import argparse
import json
import os
import shutil

import numpy as np
import safetensors.torch
import torch
import transformers
from transformers import (DebertaV2Config, DebertaV2ForSequenceClassification,
                          DebertaV2ForTokenClassification, DebertaV2Model)

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

BASE = dict(vocab_size=300, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=128, hidden_act="gelu", layer_norm_eps=1e-7, pad_token_id=0,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pooler_dropout=0.0)

V3 = dict(relative_attention=True, position_buckets=16, max_relative_positions=64,
          pos_att_type="p2c|c2p", share_att_key=True, norm_rel_ebd="layer_norm",
          position_biased_input=False, type_vocab_size=0, max_position_embeddings=512)

FAMILIES = {
    "v3_like": dict(cls=DebertaV2ForSequenceClassification, dtype="F32", labels=3,
                    config=dict(V3), lengths=[1, 2, 7, 33, 70, 150], pairs=[(12, 9), (40, 25)]),
    "v2_xlarge_like": dict(cls=DebertaV2ForSequenceClassification, dtype="F16", labels=3,
                           config=dict(V3, max_relative_positions=-1, max_position_embeddings=64,
                                       conv_kernel_size=3, conv_act="gelu", conv_groups=1),
                           lengths=[1, 2, 9, 65, 140], pairs=[(20, 31)]),
    "legacy": dict(cls=DebertaV2ForSequenceClassification, dtype="BF16", labels=2,
                   config=dict(relative_attention=True, position_buckets=-1,
                               max_relative_positions=24, pos_att_type=["c2p", "p2c"],
                               share_att_key=False, norm_rel_ebd="none",
                               position_biased_input=True, max_position_embeddings=200,
                               type_vocab_size=2, embedding_size=48),
                   lengths=[1, 2, 11, 30, 90, 200], pairs=[(14, 10), (60, 49)],
                   legacy_names=True),
    "c2p_only": dict(cls=DebertaV2ForSequenceClassification, dtype="F32", labels=1,
                     config=dict(relative_attention=True, position_buckets=8,
                                 max_relative_positions=32, pos_att_type=["c2p"],
                                 share_att_key=True, norm_rel_ebd="layer_norm",
                                 position_biased_input=False, type_vocab_size=0,
                                 conv_kernel_size=3, conv_act="tanh", conv_groups=2,
                                 problem_type="regression"),
                     lengths=[1, 2, 5, 40, 100], pairs=[(8, 8)]),
    "token_cls": dict(cls=DebertaV2ForTokenClassification, dtype="F32", labels=5,
                      config=dict(V3), lengths=[1, 3, 20, 77], pairs=[(10, 6)], shards=True),
    "encoder_only": dict(cls=DebertaV2Model, dtype="F32", labels=0, config=dict(V3),
                         lengths=[1, 2, 15, 50, 120], pairs=[(9, 30)]),
    "mdeberta_v3_like": dict(cls=DebertaV2ForSequenceClassification, dtype="F16", labels=3,
                             config=dict(V3, vocab_size=250002, embedding_size=4, hidden_size=32,
                                         num_attention_heads=1, intermediate_size=64,
                                         position_buckets=256, max_relative_positions=-1),
                             lengths=[1, 2, 9, 40, 130], pairs=[(15, 20)], used_ids=3000),
}

STORE_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def randomize(model, generator):
    """Replaces every parameter by values far from transformers' init, so that no LayerNorm is an
    identity and no bias is zero: a loader that skips a tensor cannot pass."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator, dtype=torch.float64)
            if name.endswith("LayerNorm.weight"):
                param.copy_(1.0 + 0.1 * noise)
            else:
                param.copy_(0.1 * noise)


def used_ids(spec, vocab, rng):
    """The ids the inputs draw from: all of [4, vocab), or for a family with `used_ids` that
    many, spread over the whole table and including its last row."""
    if not spec.get("used_ids"):
        return None
    ids = rng.choice(np.arange(4, vocab - 1), size=spec["used_ids"] - 1, replace=False)
    return np.sort(np.append(ids, vocab - 1))


def make_inputs(spec, vocab, rng, pool=None):
    """Token ids and types for every sequence: random ids in [4, vocab) (or from `pool`) framed
    by [CLS]=1 and [SEP]=2; pairs are [CLS] A [SEP] B [SEP] with type 1 on B and the last [SEP]."""
    def draw(size=None):
        if pool is None:
            return rng.integers(4, vocab, size=size)
        return rng.choice(pool, size=size)
    sequences = []
    for length in spec["lengths"]:
        if length <= 2:
            ids = [1, 2][:length] if length == 2 else [int(draw())]
        else:
            ids = [1] + [int(x) for x in draw(length - 2)] + [2]
        sequences.append((ids, [0] * len(ids)))
    for a, b in spec["pairs"]:
        ids = ([1] + [int(x) for x in draw(a)] + [2] + [int(x) for x in draw(b)] + [2])
        types = [0] * (a + 2) + [1] * (b + 1)
        sequences.append((ids, types))
    return sequences


def forward(model, ids, types):
    out = model(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([types]),
                output_hidden_states=True)
    hidden = out.hidden_states[-1] if hasattr(out, "hidden_states") and out.hidden_states else \
        out.last_hidden_state
    logits = getattr(out, "logits", None)
    return hidden[0], (logits[0] if logits is not None else None)


def rename_legacy(state):
    renamed = {}
    for key, value in state.items():
        if key.startswith("deberta."):
            key = key[len("deberta."):]
        if key.endswith("LayerNorm.weight"):
            key = key[:-len("weight")] + "gamma"
        elif key.endswith("LayerNorm.bias"):
            key = key[:-len("bias")] + "beta"
        renamed[key] = value
    return renamed


def build_family(name, spec, out_dir, seed):
    generator = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    config_args = dict(BASE, **spec["config"])
    if spec["labels"]:
        config_args["num_labels"] = spec["labels"]
        config_args["id2label"] = {i: f"label_{name}_{i}" for i in range(spec["labels"])}
        config_args["label2id"] = {v: k for k, v in config_args["id2label"].items()}
    config = DebertaV2Config(**config_args)
    model = spec["cls"](config).eval()
    randomize(model, generator)
    pool = used_ids(spec, config.vocab_size, rng)
    if pool is not None:
        with torch.no_grad():
            table = model.deberta.embeddings.word_embeddings.weight
            keep = torch.zeros(table.shape[0], dtype=torch.bool)
            keep[torch.from_numpy(pool)] = True
            keep[:4] = True  # [PAD] [CLS] [SEP] [UNK]
            table[~keep] = 0.0
    # Round the weights to the dtype they are stored in, so the reference sees the same values.
    store = STORE_DTYPES[spec["dtype"]]
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(param.to(store).to(torch.float32))

    family_dir = os.path.join(out_dir, name)
    shutil.rmtree(family_dir, ignore_errors=True)
    os.makedirs(family_dir)
    if spec.get("shards"):
        model.save_pretrained(family_dir, safe_serialization=True, max_shard_size="100KB")
    else:
        model.save_pretrained(family_dir, safe_serialization=True)
        state = {k: v.detach().to(store).contiguous() for k, v in model.state_dict().items()
                 if not k.endswith("position_ids")}
        if spec.get("legacy_names"):
            state = rename_legacy(state)
        safetensors.torch.save_file(state, os.path.join(family_dir, "model.safetensors"),
                                    metadata={"format": "pt"})
    for extra in ("generation_config.json",):
        path = os.path.join(family_dir, extra)
        if os.path.exists(path):
            os.remove(path)

    sequences = make_inputs(spec, config.vocab_size, rng, pool)
    hidden32, logits32, logits64 = [], [], []
    model64 = spec["cls"](config).eval().double()
    model64.load_state_dict(model.state_dict())
    worst_rel_fp32_vs_fp64 = 0.0
    with torch.no_grad():
        for ids, types in sequences:
            h, lg = forward(model, ids, types)
            h64, lg64 = forward(model64, ids, types)
            hidden32.append(h.float())
            rel = float((h.double() - h64).norm() / h64.norm())
            worst_rel_fp32_vs_fp64 = max(worst_rel_fp32_vs_fp64, rel)
            if lg is not None:
                logits32.append(lg.float())
                logits64.append(lg64.double())
        # The same sequences right-padded into one batch: valid positions must match the
        # single-sequence runs (transformers' own padding invariance, recorded for the note).
        longest = max(len(ids) for ids, _ in sequences)
        ids_b = torch.zeros(len(sequences), longest, dtype=torch.long)
        types_b = torch.zeros_like(ids_b)
        mask_b = torch.zeros_like(ids_b)
        for row, (ids, types) in enumerate(sequences):
            ids_b[row, :len(ids)] = torch.tensor(ids)
            types_b[row, :len(ids)] = torch.tensor(types)
            mask_b[row, :len(ids)] = 1
        out = model(input_ids=ids_b, token_type_ids=types_b, attention_mask=mask_b,
                    output_hidden_states=True)
        padded_hidden = out.hidden_states[-1]
        padded_diff = max(float((padded_hidden[row, :len(ids)] - hidden32[row]).abs().max())
                          for row, (ids, _) in enumerate(sequences))

    cu = np.cumsum([0] + [len(ids) for ids, _ in sequences]).astype(np.int32)
    reference = {
        "input_ids": torch.tensor([t for ids, _ in sequences for t in ids], dtype=torch.int32),
        "token_type_ids": torch.tensor([t for _, types in sequences for t in types],
                                       dtype=torch.int32),
        "cu_seqlens": torch.from_numpy(cu),
        "hidden_states": torch.cat(hidden32).contiguous(),
    }
    if spec["cls"] is DebertaV2ForSequenceClassification:
        reference["sequence_logits"] = torch.stack(logits32).contiguous()
        reference["sequence_logits_fp64"] = torch.stack(logits64).contiguous()
    elif spec["cls"] is DebertaV2ForTokenClassification:
        reference["token_logits"] = torch.cat(logits32).contiguous()
        reference["token_logits_fp64"] = torch.cat(logits64).contiguous()
    else:
        cls = torch.stack([h[0] for h in hidden32])
        mean = torch.stack([h.double().mean(0).float() for h in hidden32])
        reference["embeddings_cls_normalized"] = torch.nn.functional.normalize(cls, dim=-1)
        reference["embeddings_mean_normalized"] = torch.nn.functional.normalize(mean, dim=-1)
        reference["embeddings_mean"] = mean.contiguous()
    metadata = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "seed": str(seed),
        "hf_fp32_vs_fp64_worst_rel_l2_hidden": f"{worst_rel_fp32_vs_fp64:.3e}",
        "hf_padded_vs_single_max_abs_hidden": f"{padded_diff:.3e}",
    }
    safetensors.torch.save_file(reference, os.path.join(family_dir, "reference.safetensors"),
                                metadata=metadata)
    print(f"{name}: {len(sequences)} sequences, {int(cu[-1])} tokens, weights {spec['dtype']}, "
          f"fp32-vs-fp64 {worst_rel_fp32_vs_fp64:.2e}, padded-vs-single {padded_diff:.2e}")


def bucket_tables(out_dir):
    """transformers' make_log_bucket_position for several (buckets, max_position) pairs over
    delta in [-4096, 4096], to check the C++ float32 port value by value."""
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position
    delta = torch.arange(-4096, 4097, dtype=torch.long)
    tables = {}
    for buckets, max_position in [(256, 512), (16, 64), (8, 32), (64, 1000), (3, 40), (255, 512)]:
        values = make_log_bucket_position(delta, buckets, max_position).to(torch.int32)
        tables[f"buckets_{buckets}_max_{max_position}"] = values.contiguous()
    safetensors.torch.save_file(tables, os.path.join(out_dir, "log_buckets.safetensors"),
                                metadata={"delta_min": "-4096", "transformers":
                                          transformers.__version__})


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="output folder (tests/golden/models)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--only", nargs="*", help="build only these families (each keeps the "
                        "seed it has in a full run)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    for index, (name, spec) in enumerate(FAMILIES.items()):
        if not args.only or name in args.only:
            build_family(name, spec, args.out, args.seed + index)
    if not args.only:
        bucket_tables(args.out)
    print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
