#!/usr/bin/env python3
"""Joins dflash-bench-attention and sdpa_bench.py outputs of one device run into
bench/results/h200-attention.json, with ratios to SDPA from the same run and to the peers' times
in the reference table of kernels/attention/HISTORY.md
(BF16, 12 x 64, 16,384 tokens; measured on an H200 on 2026-11-29).
With --peers (peers_bench.py's output of the same run), the rows the peers ran (uniform shapes
and the mixes, matched on shape, L, dtype and head dim) also get the Triton peers' times from that
run (fd_*, df_*), best_peer_ms_same_run and speedup_vs_best_peer_same_run.

    python3 bench/attention/make_results.py --ours ours.jsonl --sdpa sdpa.jsonl \
        [--peers peers.jsonl] --gpu "NVIDIA H200" --command "..." \
        --out bench/results/h200-attention.json
"""
import argparse
import datetime
import json

# kernels/attention/HISTORY.md#peer-reference-times-2026-11-29: FD and DF forward ms.
PEERS_BF16_MS = {128: (0.907, 0.766), 256: (0.728, 1.216), 512: (0.810, 1.439),
                 1024: (1.214, 1.452), 2048: (2.159, 2.815), 4096: (4.111, 5.677),
                 8192: (8.011, 11.408)}
# How every time in the rows was taken (attention_bench.cc's and sdpa_bench.py's ColdRunTimer).
TIMING = ("CUDA events, median of 30 calls after warm-up; each timed call is queued behind an L2 "
          "flush (a write of 4x the L2, >= 256 MB; l2_flush_ms) and, in the Python benches, a "
          "~1 ms GPU sleep before it (sdpa_timing_prefix_ms, peers_timing_prefix_ms), so that "
          "inputs start cold and host launch time is not timed: *_host_ms is each call's median "
          "host time, hidden while below the prefix")
# peers_bench.py's field prefixes: FlashDeBERTa, DisentangledFlash.
PEER_PREFIXES = ("fd_", "df_")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def merge_peers(row, peers_row):
    """Adds a peers_bench.py row's fields (fd_ms, df_ms, layouts, errors) to the row of ours of
    the same batch, and the same-run ratio to the faster peer."""
    for key, value in peers_row.items():
        if key.startswith(PEER_PREFIXES) and not key.endswith("_version"):
            row[key] = value
    row["peers_timing_prefix_ms"] = peers_row.get("timing_prefix_ms")
    times = [peers_row.get(prefix + "ms") for prefix in PEER_PREFIXES]
    times = [ms for ms in times if ms is not None]
    if times:
        row["best_peer_ms_same_run"] = min(times)
        row["speedup_vs_best_peer_same_run"] = min(times) / row["ours_ms"]


def peer_versions(peers_rows):
    """{"flashdeberta": "0.0.8", ...} from the rows' fd_version / df_version."""
    names = {"fd_version": "flashdeberta", "df_version": "disentangled-flash"}
    return {name: r[key] for r in peers_rows for key, name in names.items() if r.get(key)}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ours", required=True)
    parser.add_argument("--sdpa", required=True)
    parser.add_argument("--peers", help="peers_bench.py output of the same run (optional)")
    parser.add_argument("--gpu", required=True)
    parser.add_argument("--command", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    sdpa = {(r["L"], r["B"], r["head_dim"], r["dtype"]): r for r in read_jsonl(args.sdpa)}
    peers_rows = read_jsonl(args.peers) if args.peers else []
    peers_by_shape = {(r.get("shape", "uniform"), r["L"], r["dtype"], r["head_dim"]): r
                      for r in peers_rows}
    rows = []
    for ours in read_jsonl(args.ours):
        row = dict(ours)
        match = sdpa.get((ours["L"], ours["B"], ours["head_dim"], ours["dtype"]))
        if ours.get("shape") == "uniform" and match:
            for key in ("sdpa_cudnn_ms", "sdpa_flash_ms", "sdpa_cudnn_host_ms",
                        "sdpa_flash_host_ms"):
                row[key] = match.get(key)
            row["sdpa_timing_prefix_ms"] = match.get("timing_prefix_ms")
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
        same_run_peers = peers_by_shape.get((ours.get("shape"), ours["L"], ours["dtype"],
                                             ours["head_dim"]))
        if same_run_peers:
            merge_peers(row, same_run_peers)
        rows.append(row)
    result = {"gpu": args.gpu, "date": datetime.date.today().isoformat(),
              "command": args.command, "timing": TIMING, "rows": rows}
    if args.peers:
        result["peer_versions"] = peer_versions(peers_rows)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    header = f"{'shape':9} {'L':>6} {'d':>4} {'dtype':5} {'ours':>8} {'cudnn':>8} {'x cudnn':>8} " \
             f"{'x peer':>7} {'TF/s':>6} {'relL2':>9}"
    if args.peers:
        header += f" {'FD':>8} {'DF':>8} {'x peer run':>10}"
    print(header)
    for r in rows:
        line = f"{r['shape']:9} {r['L']:>6} {r['head_dim']:>4} {r['dtype']:5} " \
               f"{r['ours_ms']:8.4f} {(r.get('sdpa_cudnn_ms') or 0):8.4f} " \
               f"{(r.get('ours_over_sdpa_cudnn') or 0):8.2f} " \
               f"{(r.get('speedup_vs_best_peer') or 0):7.2f} {r['tflops']:6.1f} " \
               f"{r['rel_l2_err_vs_fp32']:9.2e}"
        if args.peers:
            line += f" {(r.get('fd_ms') or 0):8.4f} {(r.get('df_ms') or 0):8.4f} " \
                    f"{(r.get('speedup_vs_best_peer_same_run') or 0):10.2f}"
        print(line)


if __name__ == "__main__":
    main()
