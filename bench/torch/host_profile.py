#!/usr/bin/env python3
"""Where the host's time goes in an end-to-end forward, per variant, on one GPU.

At the MNLI-like set's batch sizes an eager DeBERTa forward is bound by the host: the GPU
finishes each kernel before the next is issued. This runs the first --batches batches of the set
through each variant (model_variants.py) and reports, per batch:

  wall_ms      time per batch of a pass ended by a synchronize (what speed.py's e2e rows time)
  enqueue_ms   the host's time per batch before that synchronize (equal to wall_ms when the host
               is the bound)
  then, under torch.profiler (CPU activity only), the operators by self CPU time per batch, and
  under cProfile the Python functions by own time per batch (--python-top of them).

    python3 bench/torch/host_profile.py --model /tmp/dft/models/v3-base \
        --pairs /tmp/dft/mnli_like.jsonl --batch 8 --out /tmp/out/host_profile.json
"""
import cProfile
import json
import pstats
import time
from pathlib import Path

import torch

import model_variants
import speed


def timed(run, batches):
    torch.cuda.synchronize()
    start = time.perf_counter()
    outputs = [run(ids.cuda(non_blocking=True), mask.cuda(non_blocking=True), mask)
               for ids, mask in batches]
    enqueued = time.perf_counter()
    torch.cat(outputs).float().cpu()
    torch.cuda.synchronize()
    done = time.perf_counter()
    return (enqueued - start) / len(batches) * 1e3, (done - start) / len(batches) * 1e3


def best_pass(run, batches, warmup, repeats):
    """timed() after a warm-up on the first `warmup` batches: the best of `repeats` passes by
    wall time, (enqueue_ms, wall_ms), and every pass's."""
    timed(run, batches[:warmup])
    passes = [timed(run, batches) for _ in range(repeats)]
    return min(passes, key=lambda t: t[1]), passes


def operator_table(run, batches, top):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        for ids, mask in batches:
            run(ids.cuda(non_blocking=True), mask.cuda(non_blocking=True), mask)
        torch.cuda.synchronize()
    rows = sorted(profile.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    return [{"name": e.key, "calls_per_batch": e.count / len(batches),
             "self_us_per_batch": e.self_cpu_time_total / len(batches)} for e in rows[:top]]


def python_table(run, batches, top):
    profiler = cProfile.Profile()
    profiler.enable()
    for ids, mask in batches:
        run(ids.cuda(non_blocking=True), mask.cuda(non_blocking=True), mask)
    torch.cuda.synchronize()
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    rows = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    return [{"function": f"{Path(file).name}:{line}({name})", "calls_per_batch": calls / len(batches),
             "own_us_per_batch": own / len(batches) * 1e6,
             "cumulative_us_per_batch": cumulative / len(batches) * 1e6}
            for (file, line, name), (_, calls, own, cumulative, _) in rows]


def print_rows(rows, value, label, suffix="", count=12):
    """The first `count` rows of a table, one line each: row[value] in us, its calls per batch
    and row[label]."""
    for row in rows[:count]:
        print(f"    {row[value]:8.1f} us{suffix} {row['calls_per_batch']:6.1f}x {row[label]}")


def measure_variants(args, measure):
    """The workload's first args.batches batches of args.batch and its fp16 model; for each of
    args.variants (model_variants.make), the dict measure(name, run, batches) returns, taken under
    inference_mode, into result["variants"][name]. Writes the result to args.out."""
    sequences = speed.common.read_pairs(args.pairs)
    batches = speed.host_batches(sequences[:args.batch * args.batches], args.batch)
    lengths = {ids.shape[1] for ids, _ in batches}
    model = model_variants.load_classifier(args.model, "cuda", torch.float16)
    result = {"gpu": torch.cuda.get_device_name(0), "batch": args.batch,
              "batches": len(batches), "variants": {}}
    for name in args.variants.split(","):
        run = model_variants.make(name, model, lengths)
        with torch.inference_mode():
            result["variants"][name] = measure(name, run, batches)
        del run
        torch.cuda.empty_cache()
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


def main():
    parser = speed.workload_parser(__doc__)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--variants", default="stock,ours_floor_padded,ours_padded,"
                        "ours_floor_packed,ours_packed,df_padded,df_packed")
    parser.add_argument("--operator-top", type=int, default=25)
    parser.add_argument("--python-top", type=int, default=30)
    args = parser.parse_args()

    def measure(name, run, batches):
        (enqueue_ms, wall_ms), _ = best_pass(run, batches, 20, 3)
        row = {"wall_ms": wall_ms, "enqueue_ms": enqueue_ms,
               "operators": operator_table(run, batches, args.operator_top),
               "python": python_table(run, batches, args.python_top)}
        print(f"{name}: wall {wall_ms:.3f} ms/batch, enqueue {enqueue_ms:.3f} ms/batch", flush=True)
        print_rows(row["operators"], "self_us_per_batch", "name")
        print_rows(row["python"], "own_us_per_batch", "function", suffix=" own")
        return row

    measure_variants(args, measure)


if __name__ == "__main__":
    main()
