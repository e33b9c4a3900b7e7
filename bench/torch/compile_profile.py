#!/usr/bin/env python3
"""Where the time goes in the compile workload, eager and under torch.compile, on one GPU.

speed.py's compile row times stock and ours, eager and compiled, on the MNLI-like set in
batches of 64 sorted by length and padded to multiples of 64. This runs the same batches through
each --variants entry, NAME:MODE[:SHAPES]:

  NAME    a model_variants.py variant (stock, ours_padded, ours_packed, ...)
  MODE    eager, or a torch.compile mode (default, reduce-overhead, max-autotune-no-cudagraphs)
  SHAPES  auto (torch.compile's default: static first, then dynamic), static (dynamic=False:
          one graph per shape) or dynamic (dynamic=True)

and reports per batch, every shape compiled (and run once) before timing:

  wall_ms      a pass ended by a synchronize (speed.py's timing), best of --repeats
  enqueue_ms   the host's time before that synchronize (equal to wall_ms where the host bounds)
  gpu_ms       the GPU kernels' summed time, from torch.profiler over one more pass
  kernels      the GPU kernels by time (--top of them), and host_ops the operators by self CPU
               time, from the same pass
  graphs       the compiled graphs dynamo made for the variant (torch._dynamo counters)

    python3 bench/torch/compile_profile.py --model /tmp/dft/models/v3-base \
        --pairs /tmp/dft/mnli_like.jsonl --out /tmp/out/compile_profile.json
"""
import argparse
import json
import sys
import time
from pathlib import Path

import torch

import model_variants
import speed
from host_profile import best_pass, print_rows

DEFAULT_VARIANTS = ("ours_padded:eager,ours_padded:default,ours_padded:default:static,"
                    "stock:default,stock:default:static")
SHAPES = {"auto": None, "static": False, "dynamic": True}


def parse_variant(text):
    parts = text.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in SHAPES):
        raise argparse.ArgumentTypeError(
            f"variant {text!r} is not NAME:MODE[:auto|static|dynamic]")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else "auto"


def make_run(model, name, mode, shapes, batches):
    """The variant's callable, compiled and run once on every shape of `batches` where MODE asks
    for a compile (with the same arguments as the timed passes, so none of them recompiles)."""
    run = model_variants.make(name, model)
    if mode == "eager":
        return run, 0
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(run, mode=mode, dynamic=SHAPES[shapes])
    seen = {}
    for ids, mask in batches:
        seen.setdefault(tuple(ids.shape), (ids, mask))
    with torch.inference_mode():
        for index, (ids, mask) in enumerate(seen.values()):
            compiled(ids.cuda(), mask.cuda(), mask)
            print(f"    compiled shape {index + 1}/{len(seen)} {list(ids.shape)}", flush=True)
        torch.cuda.synchronize()
    return compiled, torch._dynamo.utils.counters["stats"]["unique_graphs"]


def profiled_pass(run, batches, top):
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profile:
        speed.timed_pass(run, batches)
    events = profile.key_averages()
    cuda = torch.autograd.DeviceType.CUDA
    kernels = sorted((e for e in events if e.device_type == cuda),
                     key=lambda e: e.self_device_time_total, reverse=True)
    host = sorted((e for e in events if e.device_type != cuda),
                  key=lambda e: e.self_cpu_time_total, reverse=True)
    count = len(batches)
    return {
        "gpu_ms": sum(e.self_device_time_total for e in kernels) / count / 1e3,
        "kernels": [{"name": e.key[:160], "calls_per_batch": e.count / count,
                     "us_per_batch": e.self_device_time_total / count} for e in kernels[:top]],
        "host_ops": [{"name": e.key[:160], "calls_per_batch": e.count / count,
                      "self_us_per_batch": e.self_cpu_time_total / count} for e in host[:top]],
    }


def main():
    parser = speed.workload_parser(__doc__)
    parser.add_argument("--variants", default=DEFAULT_VARIANTS,
                        help="comma-separated NAME:MODE[:SHAPES] (default: %(default)s)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--multiple", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    try:
        variants = [parse_variant(v) for v in args.variants.split(",")]
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    torch._dynamo.config.cache_size_limit = 64
    sequences = speed.common.read_pairs(args.pairs)
    batches = speed.host_batches(sequences, args.batch, sort=True, multiple=args.multiple)
    model = model_variants.load_classifier(args.model, "cuda", torch.float16)
    result = {"gpu": torch.cuda.get_device_name(0), "versions": model_variants.peer_versions(),
              "dtype": "fp16", "pairs": len(sequences), "batch": args.batch,
              "multiple": args.multiple, "batches": len(batches), "variants": {}}
    for name, mode, shapes in variants:
        label = f"{name}:{mode}" + (f":{shapes}" if mode != "eager" else "")
        print(f"{label}", flush=True)
        start = time.perf_counter()
        run, graphs = make_run(model, name, mode, shapes, batches)
        prepare_s = time.perf_counter() - start
        with torch.inference_mode():
            (enqueue_ms, wall_ms), passes = best_pass(run, batches, 4, args.repeats)
            row = {"wall_ms": wall_ms, "enqueue_ms": enqueue_ms,
                   "pass_s": [p[1] * len(batches) / 1e3 for p in passes],
                   "compile_s": prepare_s, "graphs": graphs,
                   **profiled_pass(run, batches, args.top)}
        result["variants"][label] = row
        print(f"  wall {wall_ms:.3f} ms/batch ({wall_ms * len(batches) / 1e3:.3f} s/pass), "
              f"enqueue {enqueue_ms:.3f}, gpu {row['gpu_ms']:.3f}; {graphs} graphs, "
              f"prepared in {prepare_s:.0f} s", flush=True)
        print_rows(row["kernels"], "us_per_batch", "name", count=10)
        print_rows(row["host_ops"], "self_us_per_batch", "name", suffix=" host", count=6)
        sys.stdout.flush()
        del run
        torch.cuda.empty_cache()
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
