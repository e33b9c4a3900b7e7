#!/usr/bin/env python3
"""Joins the CUDA engine's benchmark (dflash-bench-engine's OURS.json and raw logits) with
hf_baseline.py's output of the same run into bench/results/h200-engine.json.

    python3 bench/engine/make_engine_results.py --ours /tmp/dfe/ours.json --hf /tmp/dfe/hf.json \
        --parity-prefix /tmp/dfe/parity --gpu "NVIDIA H200" --command "..." \
        --out bench/results/h200-engine.json

OURS.json: {"model", "dtype", "mnli_like": {"pairs", "seconds"}, "single_128": {"ms"},
"long_8192": {"ms", "peak_gib"}, "long_32768": {"ms", "peak_gib"},
"tokens_per_s": {"16384": x, "65536": y}, "split": {"gemm_ms", "attention_ms", "other_ms"}}.
Raw files (little-endian float32, row-major): PREFIX.ours_fp32.f32 and PREFIX.ours_<dtype>.f32
([N, num_labels] for the first N pairs, N >= hf_baseline's --parity-count; extra rows are
ignored), and optionally PREFIX.ours_hidden_fp32.f32 / PREFIX.ours_hidden_<dtype>.f32 in the
layout of PREFIX.hidden.json (valid rows of the listed pairs, concatenated).

Parity, all against transformers' float32 logits (hf_fp32):
  <dtype>_rel_err_logits     ||ours_<dtype> - hf_fp32|| / ||hf_fp32|| over the [N, labels] array
  hf_<dtype>_rel_err_logits  the same for transformers' own <dtype> run
  ours_fp32_rel_err_logits   the same for our float32 path (issue bound: 1e-4)
  argmax_agreement           among rows whose hf_fp32 top-2 margin exceeds the threshold, the
                             fraction where ours_<dtype> has hf_fp32's argmax. Threshold = the
                             largest |hf_<dtype> - hf_fp32| over all N x labels logits (the error
                             transformers itself shows). Since one logit error e can move a margin
                             by 2e, the agreement at twice that threshold and over all rows is
                             given too, with the indices of disagreeing rows.
Hidden states likewise (rel L2 over the valid rows) where the files exist.
"""
import argparse
import datetime
import json
import os

import numpy as np

import engine_common as common


def load_json(path):
    with open(path) as f:
        return json.load(f)


def errors_or_none(prefix, name, reference, columns):
    path = f"{prefix}.{name}.f32"
    if not os.path.exists(path):
        return None, None
    values = common.read_f32(path, columns)
    if values.shape[0] < reference.shape[0]:
        raise SystemExit(f"{path}: {values.shape[0]} rows, expected at least "
                         f"{reference.shape[0]}")
    values = values[:reference.shape[0]]
    return common.relative_errors(values, reference), values


def argmax_agreement(ours, reference, threshold):
    top2 = np.sort(reference, axis=1)[:, -2:]
    margin = top2[:, 1] - top2[:, 0]
    agree = ours.argmax(1) == reference.argmax(1)

    def among(rows):
        count = int(rows.sum())
        return {"rows": count, "agreement": float(agree[rows].mean()) if count else None}

    return {"threshold": threshold, "at_threshold": among(margin > threshold),
            "at_twice_threshold": among(margin > 2 * threshold),
            "all_rows": among(np.ones_like(agree)),
            "disagreeing_rows": np.flatnonzero(~agree).tolist()[:50],
            "fp32_margin_p10_p50_p90": np.percentile(margin, [10, 50, 90]).round(4).tolist()}


def parity(prefix, dtype, num_labels):
    hf32 = common.read_f32(f"{prefix}.hf_fp32.f32", num_labels)
    hf_test = common.read_f32(f"{prefix}.hf_{dtype}.f32", num_labels)
    hf_err = common.relative_errors(hf_test, hf32)
    ours_err, ours_test = errors_or_none(prefix, f"ours_{dtype}", hf32, num_labels)
    ours32_err, _ = errors_or_none(prefix, "ours_fp32", hf32, num_labels)
    threshold = hf_err["max_abs"]
    result = {
        "pairs": int(hf32.shape[0]), "reference": "transformers float32 (TF32 off)",
        f"{dtype}_rel_err_logits": ours_err and ours_err["rel_l2"],
        f"hf_{dtype}_rel_err_logits": hf_err["rel_l2"],
        "ours_fp32_rel_err_logits": ours32_err and ours32_err["rel_l2"],
        "ours_fp32_within_1e-4": ours32_err and ours32_err["rel_l2"] <= 1e-4,
        f"{dtype}_logits": ours_err, f"hf_{dtype}_logits": hf_err, "fp32_logits": ours32_err,
    }
    if ours_test is not None:
        detail = argmax_agreement(ours_test, hf32, threshold)
        result["argmax_agreement"] = detail["at_threshold"]["agreement"]
        result["argmax_rows_qualifying"] = detail["at_threshold"]["rows"]
        result["argmax"] = detail
    index = common.read_hidden_index(prefix)
    columns = index["hidden_size"]
    hidden32 = common.read_f32(f"{prefix}.hf_hidden_fp32.f32", columns)
    hidden = {"pairs": index["pairs"], "rows": int(hidden32.shape[0]),
              f"hf_{dtype}": common.relative_errors(
                  common.read_f32(f"{prefix}.hf_hidden_{dtype}.f32", columns), hidden32)}
    for name in ("fp32", dtype):
        hidden[f"ours_{name}"], _ = errors_or_none(prefix, f"ours_hidden_{name}", hidden32,
                                                   columns)
    result["hidden_states"] = hidden
    return result


def ratio(numerator, denominator):
    return numerator / denominator if numerator and denominator else None


def long_row(hf, length, count):
    for row in hf.get("long", []):
        if row["length"] == length and row["sequences"] == count:
            return row
    return {}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ours", required=True, help="dflash-bench-engine JSON")
    parser.add_argument("--hf", required=True, help="hf_baseline.py JSON")
    parser.add_argument("--parity-prefix", required=True)
    parser.add_argument("--gpu", required=True)
    parser.add_argument("--command", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    ours = load_json(args.ours)
    hf = load_json(args.hf)
    dtype = ours.get("dtype", hf["dtype"])
    if dtype != hf["dtype"]:
        raise SystemExit(f"ours ran {dtype}, transformers ran {hf['dtype']}")

    hf_mnli = hf["mnli_like"]
    ours_mnli = ours["mnli_like"]
    if ours_mnli["pairs"] != hf_mnli["pairs"]:
        raise SystemExit(f"pairs: ours {ours_mnli['pairs']}, transformers {hf_mnli['pairs']}")
    hf_times = {k: hf_mnli.get(k) for k in ("batch8_s", "batch64_s", "batch64_sorted_s")}
    best_hf = min((v for v in hf_times.values() if v), default=None)  # None: parity-only run
    hf_single = hf["single"]["ms"] if hf["single"]["length"] == 128 else None
    hf8192 = long_row(hf, 8192, 1)
    # Parity-only runs (--long_sequences=false) have no long-sequence figures.
    long8192 = ours.get("long_8192", {})
    long32768 = ours.get("long_32768", {})
    hf8192x4 = long_row(hf, 8192, 4)
    split = dict(ours.get("split", {}))
    total = sum(v for v in split.values() if v)
    if total:
        split.update({k.replace("_ms", "_fraction"): v / total for k, v in list(split.items())})

    result = {
        "gpu": args.gpu, "date": datetime.date.today().isoformat(), "command": args.command,
        "model": ours.get("model"), "dtype": dtype,
        "mnli_like": {
            "pairs": ours_mnli["pairs"], "ours_s": ours_mnli["seconds"],
            "hf_batch8_s": hf_times["batch8_s"], "hf_batch64_s": hf_times["batch64_s"],
            "hf_batch64_sorted_s": hf_times["batch64_sorted_s"],
            "ours_seq_per_s": ours_mnli["pairs"] / ours_mnli["seconds"],
            "speedup_vs_hf_batch8": ratio(hf_times["batch8_s"], ours_mnli["seconds"]),
            "speedup_vs_hf_batch64": ratio(hf_times["batch64_s"], ours_mnli["seconds"]),
            "speedup_vs_hf_best": ratio(best_hf, ours_mnli["seconds"]),
            "tokens": hf["pairs_stats"]["tokens"], "length_stats": hf["pairs_stats"]},
        "single_128": {"ours_ms": ours["single_128"]["ms"], "hf_ms": hf_single,
                       "speedup": ratio(hf_single, ours["single_128"]["ms"])},
        "long_8192": {"ours_ms": long8192.get("ms"),
                      "ours_peak_gib": long8192.get("peak_gib"),
                      "hf_ms": hf8192.get("ms"), "hf_peak_gib": hf8192.get("peak_gib"),
                      "hf_activation_peak_gib": hf8192.get("activation_peak_gib"),
                      "speedup": ratio(hf8192.get("ms"), long8192.get("ms")),
                      "hf_4x8192_ms": hf8192x4.get("ms"),
                      "hf_4x8192_peak_gib": hf8192x4.get("peak_gib"),
                      "hf_4x8192_error": hf8192x4.get("error")},
        "long_32768": {"ours_ms": long32768.get("ms"),
                       "ours_peak_gib": long32768.get("peak_gib")},
        "tokens_per_s": ours.get("tokens_per_s"),
        "split": split,
        "parity": parity(args.parity_prefix, dtype, hf["model"]["num_labels"]),
        "environment": hf["environment"],
        "hf_model": hf["model"],
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    p = result["parity"]
    m = result["mnli_like"]
    if m["speedup_vs_hf_best"] is not None:  # Parity-only runs time no transformers batches.
        print(f"mnli_like {m['pairs']} pairs: ours {m['ours_s']:.3f} s, transformers b8 "
              f"{m['hf_batch8_s']:.3f} / b64 {m['hf_batch64_s']:.3f} / b64 sorted "
              f"{m['hf_batch64_sorted_s']:.3f} s; speedup vs best {m['speedup_vs_hf_best']:.2f}x")
    print(f"single_128: ours {result['single_128']['ours_ms']} ms, transformers {hf_single} ms")
    print(f"parity over {p['pairs']} pairs: ours {dtype} {p[f'{dtype}_rel_err_logits']}, "
          f"transformers {dtype} {p[f'hf_{dtype}_rel_err_logits']:.3e}, ours fp32 "
          f"{p['ours_fp32_rel_err_logits']}, argmax {p.get('argmax_agreement')} over "
          f"{p.get('argmax_rows_qualifying')} rows")


if __name__ == "__main__":
    main()
