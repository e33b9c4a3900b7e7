#!/usr/bin/env python3
"""Joins dflash-bench-attention and sdpa_bench.py outputs of one device run into
bench/results/h200-attention.json, with ratios to SDPA from the same run and to the peers' times
listed in shared/KERNELS.md (BF16, 12 x 64, 16,384 tokens; measured on an H200 of this workplace).

    python3 bench/attention/make_results.py --ours ours.jsonl --sdpa sdpa.jsonl \
        --gpu "NVIDIA H200" --command "..." --out bench/results/h200-attention.json
"""
import argparse
import datetime
import json

# shared/KERNELS.md, "Measured on one H200 of this workplace (2026-11-29)": FD and DF forward ms.
PEERS_BF16_MS = {128: (0.907, 0.766), 256: (0.728, 1.216), 512: (0.810, 1.439),
                 1024: (1.214, 1.452), 2048: (2.159, 2.815), 4096: (4.111, 5.677),
                 8192: (8.011, 11.408)}


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ours", required=True)
    parser.add_argument("--sdpa", required=True)
    parser.add_argument("--gpu", required=True)
    parser.add_argument("--command", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    sdpa = {(r["L"], r["B"], r["head_dim"], r["dtype"]): r for r in read_jsonl(args.sdpa)}
    rows = []
    for ours in read_jsonl(args.ours):
        row = dict(ours)
        match = sdpa.get((ours["L"], ours["B"], ours["head_dim"], ours["dtype"]))
        if ours.get("shape") == "uniform" and match:
            row["sdpa_cudnn_ms"] = match.get("sdpa_cudnn_ms")
            row["sdpa_flash_ms"] = match.get("sdpa_flash_ms")
            if row["sdpa_cudnn_ms"]:
                row["ours_over_sdpa_cudnn"] = ours["ours_ms"] / row["sdpa_cudnn_ms"]
            if row["sdpa_flash_ms"]:
                row["ours_over_sdpa_flash"] = ours["ours_ms"] / row["sdpa_flash_ms"]
        peers = PEERS_BF16_MS.get(ours["L"])
        if peers and ours["dtype"] == "bf16" and ours["head_dim"] == 64 and \
                ours.get("shape") == "uniform":
            best = min(peers)
            row["best_peer_ms_kernels_md"] = best
            row["speedup_vs_best_peer"] = best / ours["ours_ms"]
        rows.append(row)
    result = {"gpu": args.gpu, "date": datetime.date.today().isoformat(),
              "command": args.command, "rows": rows}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    header = f"{'shape':9} {'L':>6} {'d':>4} {'dtype':5} {'ours':>8} {'cudnn':>8} {'x cudnn':>8} " \
             f"{'x peer':>7} {'TF/s':>6} {'relL2':>9}"
    print(header)
    for r in rows:
        print(f"{r['shape']:9} {r['L']:>6} {r['head_dim']:>4} {r['dtype']:5} {r['ours_ms']:8.4f} "
              f"{(r.get('sdpa_cudnn_ms') or 0):8.4f} {(r.get('ours_over_sdpa_cudnn') or 0):8.2f} "
              f"{(r.get('speedup_vs_best_peer') or 0):7.2f} {r['tflops']:6.1f} "
              f"{r['rel_l2_err_vs_fp32']:9.2e}")


if __name__ == "__main__":
    main()
