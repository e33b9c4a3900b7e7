#!/usr/bin/env python3
"""The ceiling for dflash-bench-attention: torch's scaled_dot_product_attention (cuDNN and flash
backends, no bias) on the same shapes, timed the same way (CUDA events, warm-up, median).

    python3 bench/attention/sdpa_bench.py --json sdpa.jsonl [--lengths 128,...] [--dtypes bf16,fp16]
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def time_ms(fn, repeats, warmups=3):
    """Median of `repeats` CUDA-event timings of fn(), after `warmups` untimed calls (also used by
    peers_bench.py, whose first calls compile the peers' Triton kernels)."""
    for _ in range(warmups):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def heads_for(head_dim):
    """The benchmark's head count: 12 x 64 (deberta-v3-base), else 768 / d heads."""
    return 12 if head_dim == 64 else 768 // head_dim


def add_shape_arguments(parser, lengths):
    """The shape and timing options shared with peers_bench.py (`lengths`: the default list)."""
    parser.add_argument("--lengths", default=lengths)
    parser.add_argument("--dtypes", default="bf16,fp16")
    parser.add_argument("--head_dims", default="64")
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--repeats", type=int, default=30)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_shape_arguments(parser, "128,256,512,1024,2048,4096,8192,16384,32768")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    with open(args.json, "w") as out:
        for dtype_name in args.dtypes.split(","):
            for head_dim in [int(x) for x in args.head_dims.split(",")]:
                heads = heads_for(head_dim)
                for length in [int(x) for x in args.lengths.split(",")]:
                    batch = max(1, args.tokens // length)
                    q, k, v = (torch.randn(batch, heads, length, head_dim, device="cuda",
                                           dtype=dtypes[dtype_name]) for _ in range(3))
                    row = {"L": length, "B": batch, "heads": heads, "head_dim": head_dim,
                           "dtype": dtype_name}
                    for name, backend in (("sdpa_cudnn_ms", SDPBackend.CUDNN_ATTENTION),
                                          ("sdpa_flash_ms", SDPBackend.FLASH_ATTENTION)):
                        try:
                            with sdpa_kernel(backend):
                                row[name] = time_ms(
                                    lambda: F.scaled_dot_product_attention(q, k, v),
                                    args.repeats)
                        except RuntimeError as error:
                            row[name] = None
                            row[name + "_error"] = str(error).splitlines()[0][:200]
                    print(json.dumps(row), flush=True)
                    out.write(json.dumps(row) + "\n")
                    del q, k, v
                    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
