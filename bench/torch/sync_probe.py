#!/usr/bin/env python3
"""Does a variant's forward synchronise with the device, and is it bound by the host?

For each variant (model_variants.py) at one batch size: the synchronising calls that PyTorch's
sync debug mode reports over three batches (after 20 to warm up), then the best of three passes
over the first --batches batches of the MNLI-like set with, per batch, a CUDA event before its
inputs are copied and one after its forward is enqueued:

  wall_ms      time per batch of a pass ended by a synchronize (what speed.py's e2e rows time)
  enqueue_ms   the host's time per batch before that synchronize
  gpu_span_ms  mean time between a batch's two events on the device: equal to wall_ms both when
               the device is the bound and when it waits for the host's launches; the syncs and
               enqueue_ms tell the two apart

    python3 bench/torch/sync_probe.py --model /tmp/dft/models/v3-base \
        --pairs /tmp/dft/mnli_like.jsonl --batch 8 --out /tmp/out/sync-probe-b8.json
"""
import json
import time
import warnings

import torch

import speed
from host_profile import measure_variants


def synchronising_calls(run, batches):
    for ids, mask in batches[:20]:
        run(ids.cuda(non_blocking=True), mask.cuda(non_blocking=True), mask)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for ids, mask in batches[:3]:
                run(ids.cuda(non_blocking=True), mask.cuda(non_blocking=True), mask)
            torch.cuda.synchronize()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return sorted({str(w.message)[:200] for w in caught})


def timed_passes(run, batches, passes):
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in batches]
    best = None
    for _ in range(passes):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for (ids, mask), (begin, end) in zip(batches, events):
            begin.record()
            run(ids.cuda(non_blocking=True), mask.cuda(non_blocking=True), mask)
            end.record()
        enqueued = time.perf_counter()
        torch.cuda.synchronize()
        done = time.perf_counter()
        row = {"wall_ms": (done - start) / len(batches) * 1e3,
               "enqueue_ms": (enqueued - start) / len(batches) * 1e3,
               "gpu_span_ms": sum(b.elapsed_time(e) for b, e in events) / len(batches)}
        if best is None or row["wall_ms"] < best["wall_ms"]:
            best = row
    return best


def main():
    parser = speed.workload_parser(__doc__)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--variants",
                        default="ours_padded,ours_packed,ours_floor_padded,ours_floor_packed")
    args = parser.parse_args()

    def measure(name, run, batches):
        row = {"synchronising_calls": synchronising_calls(run, batches),
               **timed_passes(run, batches, 3)}
        print(f"{name}: {json.dumps(row)}", flush=True)
        return row

    measure_variants(args, measure)


if __name__ == "__main__":
    main()
