#!/usr/bin/env python3
"""MNLI-like decision parity of dflash_torch against stock transformers, on the GPU.

Every pair of the MNLI-like set (bench/engine/mnli_like_pairs.py: 9,815 pairs) runs in arrival
order at --batch (8) through stock transformers in float32 (TF32 off: the reference decisions) and
float16, and through optimize_deberta in float16, padded and packed.

Which pairs fp16 can decide: a pair's fp16 error e is the largest absolute logit difference of
transformers' own float16 run from its float32 run. Rounding that moves each logit by at most e
moves the top-2 margin by at most 2e, so a decision can flip only where the float32 margin is
<= 2e. On every pair whose float32 top-2 margin exceeds 2e, ours must decide as the float32
reference: zero mismatches (the pass). Also reported: the same count with the threshold e alone
(pairs whose margin lies in (e, 2e] can flip for stock float16 too), with the largest e over the
set as one global threshold, with our own error as the threshold, mismatches on all pairs against
float32 and against stock float16 (stock float16's own count against float32 beside them). The
logits are kept (--logits, .npz) so the counts can be recomputed without a GPU.

    python3 bench/torch/mnli_decisions.py --model /tmp/dft/models/v3-base \
        --pairs /tmp/dft/mnli_like.jsonl --out /tmp/out/mnli-decisions.json
"""
import argparse
import copy
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

import engine_common as common  # noqa: E402
import model_variants  # noqa: E402


def logits_of(run, batches):
    with torch.inference_mode():
        return torch.cat([run(ids.cuda(non_blocking=True), mask.cuda(non_blocking=True)).float()
                          for ids, mask in batches]).cpu().numpy().astype(np.float64)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--pairs", required=True)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--out", required=True)
    parser.add_argument("--logits", help="also write every run's logits to this .npz")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sequences = common.read_pairs(args.pairs)
    batches = [common.pad_batch(sequences[i:i + args.batch], "cpu")
               for i in range(0, len(sequences), args.batch)]
    model32 = model_variants.load_classifier(args.model, "cuda", torch.float32)
    reference = logits_of(model_variants.stock(model32), batches)
    model16 = copy.deepcopy(model32).to(torch.float16)
    del model32
    stock16 = logits_of(model_variants.stock(model16), batches)
    top2 = np.sort(reference, axis=1)[:, -2:]
    margin = top2[:, 1] - top2[:, 0]
    stock_error = np.abs(stock16 - reference).max(axis=1)
    global_error = float(stock_error.max())
    decisions = reference.argmax(axis=1)
    result = {"model": args.model, "pairs": len(sequences), "batch": args.batch, "dtype": "fp16",
              "versions": model_variants.peer_versions(),
              "criterion": "float32 top-2 margin > 2 x stock float16's max abs logit error of "
                           "the pair",
              "stock_fp16_mismatches": int((stock16.argmax(axis=1) != decisions).sum()),
              "stock_fp16_max_error": global_error,
              "eligible_pairs": int((margin > 2 * stock_error).sum()),
              "eligible_pairs_error_once": int((margin > stock_error).sum()),
              "eligible_pairs_global_error": int((margin > 2 * global_error).sum())}
    passed = True
    logits = {"reference_fp32": reference, "stock_fp16": stock16}
    for layout in ("padded", "packed"):
        ours = logits_of(model_variants.ours(model16, layout), batches)
        logits[f"ours_{layout}"] = ours
        ours_error = np.abs(ours - reference).max(axis=1)
        mismatch = ours.argmax(axis=1) != decisions
        entry = {
            "mismatches_on_eligible": int((mismatch & (margin > 2 * stock_error)).sum()),
            "mismatches_error_once": int((mismatch & (margin > stock_error)).sum()),
            "mismatches_global_error": int((mismatch & (margin > 2 * global_error)).sum()),
            "mismatches_with_own_error_threshold": int(
                (mismatch & (margin > 2 * ours_error)).sum()),
            "mismatches_all": int(mismatch.sum()),
            "mismatches_vs_stock_fp16": int((ours.argmax(axis=1) != stock16.argmax(axis=1)).sum()),
            "max_error": float(ours_error.max()),
            "mean_error": float(ours_error.mean()),
            "rel_l2": common.relative_errors(ours, reference)["rel_l2"],
        }
        passed &= entry["mismatches_on_eligible"] == 0
        result[f"ours_{layout}"] = entry
        print(layout, json.dumps(entry), flush=True)
    if args.logits:
        np.savez_compressed(args.logits, **logits)
    result["pass"] = bool(passed)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}: pass={result['pass']}")


if __name__ == "__main__":
    main()
