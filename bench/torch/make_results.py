#!/usr/bin/env python3
"""Joins one GPU run of bench/torch/run_on_gpu.sh into bench/results/h200-torch.json.

Inputs: speed.py's JSON (end-to-end, compile and attention-op rows; several files, one per
section of a run split over device calls, are joined in the order given), dflash-bench-attention's
JSON lines of the same run (cxx_ms: the same kernel called from C++, same shapes and method), the
parity JSONs of parity.py and the decision run of mnli_decisions.py. The targets of the issue are
evaluated on ratios of times measured in the same run:
  ours packed >= 1.5x DisentangledFlash packed, ours padded >= 2x DisentangledFlash padded
  (end to end, per batch size); ours under torch.compile >= 1.5x stock under the same mode;
  the torch op within 10% of C++ at every L.

    python3 bench/torch/make_results.py --speed speed.json --cxx cxx.jsonl \
        --parity parity-v3-base.json parity-v3-large.json parity-v2-xlarge.json \
        --decisions mnli-decisions.json --gpu "NVIDIA H200" --command "..." --out h200-torch.json
"""
import argparse
import json
from pathlib import Path


def ratio(numerator, denominator):
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def join_speed_files(paths):
    """One speed.py result from the files of a run split over device calls: rows of every file,
    errors of every file, the first file's versions (each file is checked to match)."""
    joined = {"e2e": [], "compile": [], "attention_op": [], "errors": {}}
    for path in paths:
        part = json.loads(Path(path).read_text())
        versions = joined.setdefault("versions", part.get("versions"))
        if part.get("versions") != versions:
            raise SystemExit(f"{path}: versions {part.get('versions')} differ from {versions}")
        for key in ("e2e", "compile", "attention_op"):
            joined[key] += part.get(key, [])
        joined["errors"].update(part.get("errors") or {})
    return joined


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--speed", nargs="+", required=True)
    parser.add_argument("--cxx", help="dflash-bench-attention --json output of the same run")
    parser.add_argument("--parity", nargs="*", default=[])
    parser.add_argument("--decisions")
    parser.add_argument("--gpu", required=True)
    parser.add_argument("--command", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    speed = join_speed_files(args.speed)
    rows = speed.get("e2e", []) + speed.get("compile", [])
    for row in rows:
        row["ours_vs_df"] = ratio(row.get("df_s"), row.get("ours_s"))
        row["ours_vs_eager"] = ratio(row.get("eager_s"), row.get("ours_s"))
        row["ours_compiled_vs_compiled"] = ratio(row.get("compiled_s"), row.get("ours_compiled_s"))
        # What any attention-only replacement could reach: the model with the attention op skipped.
        row["floor_vs_df"] = ratio(row.get("df_s"), row.get("ours_floor_s"))
        row["ours_graphs_vs_df"] = ratio(row.get("df_s"), row.get("ours_graphs_s"))
    cxx = {}
    if args.cxx and Path(args.cxx).is_file():
        for line in Path(args.cxx).read_text().splitlines():
            entry = json.loads(line)
            if entry.get("shape") == "uniform" and entry.get("dtype") == "bf16" \
                    and entry.get("head_dim") == 64:
                cxx[entry["L"]] = entry["ours_ms"]
    op_rows = []
    for row in speed.get("attention_op", []):
        row = dict(row, cxx_ms=cxx.get(row["L"]))
        row["op_over_cxx"] = ratio(row["op_ms"], row["cxx_ms"])
        row["op_over_capi"] = ratio(row["op_ms"], row.get("capi_ms"))
        op_rows.append(row)
    targets = []
    for row in speed.get("e2e", []):
        need = 1.5 if row["layout"] == "packed" else 2.0
        targets.append({"target": f"ours {row['layout']} >= {need}x DisentangledFlash "
                                  f"{row['layout']}, batch {row['batch']}",
                        "value": row["ours_vs_df"],
                        "met": row["ours_vs_df"] is not None and row["ours_vs_df"] >= need,
                        "bound_attention_only": row["floor_vs_df"]})
        if row.get("ours_graphs_vs_df") is not None:
            value = row["ours_graphs_vs_df"]
            targets.append({"target": f"ours {row['layout']} with cuda_graphs=True >= {need}x "
                                      f"DisentangledFlash {row['layout']}, batch {row['batch']}",
                            "value": value, "met": value >= need})
    # The same padded batches in, the same real-position outputs out: ours packed with graphs
    # (it packs the padded batch itself) against DisentangledFlash's padded forward.
    by_key = {(r["batch"], r["layout"]): r for r in speed.get("e2e", [])}
    for (batch, layout), row in sorted(by_key.items()):
        padded = by_key.get((batch, "padded"))
        if layout == "packed" and padded and row.get("ours_graphs_s") and padded.get("df_s"):
            value = ratio(padded["df_s"], row["ours_graphs_s"])
            targets.append({"target": f"ours packed with cuda_graphs=True >= 2.0x "
                                      f"DisentangledFlash padded, batch {batch} (same padded "
                                      f"input)", "value": value, "met": value >= 2.0})
    for row in speed.get("compile", []):
        value = row["ours_compiled_vs_compiled"]
        targets.append({"target": "ours under torch.compile >= 1.5x stock under the same mode",
                        "value": value, "met": value is not None and value >= 1.5})
    if op_rows:
        worst = max((r["op_over_cxx"] for r in op_rows if r["op_over_cxx"] is not None),
                    default=None)
        targets.append({"target": "torch op within 10% of C++ (worst L)", "value": worst,
                        "met": worst is not None and worst <= 1.10})
    parity = {}
    for path in args.parity:
        entry = json.loads(Path(path).read_text())
        parity[Path(entry["model"]).name] = entry
    result = {
        "description": "dflash_torch (python/) on one GPU: end-to-end through transformers "
                       "(MNLI-like set, fp16), torch.compile, the attention op against the same "
                       "kernel from C++, parity and MNLI-like decision parity. Seconds for e2e "
                       "rows, ms for op rows; peers measured in the same run.",
        "gpu": args.gpu,
        "command": args.command,
        "versions": speed.get("versions"),
        "e2e": rows,
        "attention_op": op_rows,
        "parity": parity,
        "decisions": json.loads(Path(args.decisions).read_text()) if args.decisions else None,
        "errors": speed.get("errors"),
        "targets": targets,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for target in targets:
        bound = target.get("bound_attention_only")
        print(f"{'met ' if target['met'] else 'MISS'} {target['target']}: {target['value']}"
              + (f" (attention-only bound {bound:.2f})" if bound is not None else ""))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
