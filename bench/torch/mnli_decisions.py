#!/usr/bin/env python3
"""MNLI-like decision parity of dflash_torch against stock transformers, on the GPU.

Every pair of the MNLI-like set (bench/engine/mnli_like_pairs.py: 9,815 pairs) runs in arrival
order at --batch (8) through stock transformers in float32 (TF32 off: the reference decisions) and
float16, and through optimize_deberta in float16, padded, packed, and padded and packed with
cuda_graphs=True ("graphs", "graphs_packed").

Which pairs fp16 can decide: the fp16 error is the largest absolute logit difference of
transformers' own float16 run from its float32 run over the whole set. On every pair whose float32
top-2 margin exceeds it, ours must decide as the float32 reference: zero mismatches (the pass).
Also reported, per pair (e: that pair's stock float16 error): mismatches where the margin exceeds
2e (rounding that moves each logit by at most e moves a margin by at most 2e, so stock float16
cannot flip there, but ours, whose error on a pair can exceed stock's, can) and e, with our own
error as e, on all pairs against float32 and against stock float16 (stock float16's own count
against float32 beside them). The logits are kept (--logits, .npz); --from-logits recomputes the
counts from them without a GPU.

    python3 bench/torch/mnli_decisions.py --model /tmp/dft/models/v3-base \
        --pairs /tmp/dft/mnli_like.jsonl --out /tmp/out/mnli-decisions.json \
        [--logits /tmp/out/mnli-decisions-logits.npz]
    python3 bench/torch/mnli_decisions.py --from-logits mnli-decisions-logits.npz --out ...
"""
import argparse
import copy
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

import engine_common as common  # noqa: E402

VARIANTS = ("padded", "packed", "graphs", "graphs_packed")


def logits_of(run, batches):
    import torch

    with torch.inference_mode():
        return torch.cat([run(ids.cuda(non_blocking=True), mask.cuda(non_blocking=True)).float()
                          for ids, mask in batches]).cpu().numpy().astype(np.float64)


def decision_counts(logits):
    """The report's counts from {"reference_fp32", "stock_fp16", "ours_padded", "ours_packed",
    "ours_graphs", "ours_graphs_packed" (the last two absent from older logits files)}."""
    reference, stock16 = logits["reference_fp32"], logits["stock_fp16"]
    top2 = np.sort(reference, axis=1)[:, -2:]
    margin = top2[:, 1] - top2[:, 0]
    stock_error = np.abs(stock16 - reference).max(axis=1)
    global_error = float(stock_error.max())
    decisions = reference.argmax(axis=1)
    result = {"criterion": "float32 top-2 margin > stock float16's largest abs logit error over "
                           "the set",
              "stock_fp16_mismatches": int((stock16.argmax(axis=1) != decisions).sum()),
              "stock_fp16_max_error": global_error,
              "eligible_pairs": int((margin > global_error).sum()),
              "eligible_pairs_twice_own_stock_error": int((margin > 2 * stock_error).sum())}
    passed = True
    for layout in [v for v in VARIANTS if f"ours_{v}" in logits]:
        ours = logits[f"ours_{layout}"]
        ours_error = np.abs(ours - reference).max(axis=1)
        mismatch = ours.argmax(axis=1) != decisions
        entry = {
            "mismatches_on_eligible": int((mismatch & (margin > global_error)).sum()),
            "mismatches_twice_own_stock_error": int((mismatch & (margin > 2 * stock_error)).sum()),
            "mismatches_own_stock_error": int((mismatch & (margin > stock_error)).sum()),
            "mismatches_with_own_error_threshold": int(
                (mismatch & (margin > 2 * ours_error)).sum()),
            "mismatches_all": int(mismatch.sum()),
            "mismatches_vs_stock_fp16": int((ours.argmax(axis=1) != stock16.argmax(axis=1)).sum()),
            "max_error": float(ours_error.max()),
            "mean_error": float(ours_error.mean()),
            "rel_l2": float(np.linalg.norm(ours - reference) / np.linalg.norm(reference)),
        }
        passed &= entry["mismatches_on_eligible"] == 0
        result[f"ours_{layout}"] = entry
        print(layout, json.dumps(entry), flush=True)
    result["pass"] = bool(passed)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model")
    parser.add_argument("--pairs")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--out", required=True)
    parser.add_argument("--logits", help="also write every run's logits to this .npz")
    parser.add_argument("--from-logits", help="recompute the counts from this .npz (no GPU)")
    args = parser.parse_args()
    if args.from_logits:
        previous = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
        kept = {k: previous[k] for k in ("model", "pairs", "batch", "dtype", "versions")
                if k in previous}
        result = dict(kept, **decision_counts(dict(np.load(args.from_logits))))
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}: pass={result['pass']}")
        return
    if not (args.model and args.pairs):
        parser.error("--model and --pairs are needed (or --from-logits)")
    import torch
    import model_variants

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sequences = common.read_pairs(args.pairs)
    batches = [common.pad_batch(sequences[i:i + args.batch], "cpu")
               for i in range(0, len(sequences), args.batch)]
    model32 = model_variants.load_classifier(args.model, "cuda", torch.float32)
    logits = {"reference_fp32": logits_of(model_variants.stock(model32), batches)}
    model16 = copy.deepcopy(model32).to(torch.float16)
    del model32
    logits["stock_fp16"] = logits_of(model_variants.stock(model16), batches)
    for variant in VARIANTS:
        layout, options = {"graphs": ("padded", {"cuda_graphs": True}),
                           "graphs_packed": ("packed", {"cuda_graphs": True})}.get(
                               variant, (variant, {}))
        logits[f"ours_{variant}"] = logits_of(model_variants.ours(model16, layout, **options),
                                              batches)
    result = {"model": args.model, "pairs": len(sequences), "batch": args.batch, "dtype": "fp16",
              "versions": model_variants.peer_versions(), **decision_counts(logits)}
    if args.logits:
        np.savez_compressed(args.logits, **logits)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}: pass={result['pass']}")


if __name__ == "__main__":
    main()
