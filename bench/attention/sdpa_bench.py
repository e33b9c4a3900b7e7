#!/usr/bin/env python3
"""The ceiling for dflash-bench-attention: torch's scaled_dot_product_attention (cuDNN and flash
backends, no bias) on the same shapes, timed the same way (CUDA events, warm-up, median, each
call cold: ColdRunTimer).

    python3 bench/attention/sdpa_bench.py --json sdpa.jsonl [--lengths 128,...] [--dtypes bf16,fp16]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


class ColdRunTimer:
    """dflash-bench-attention's timing (its ColdRunTimer), for torch callables; also used by
    peers_bench.py. Each timed call is queued behind a GPU sleep of about a millisecond and a
    write of four times the L2 (at least 256 MB, as triton's do_bench, which the peers' reference
    times come from), so its inputs start cold and the host's launches (Python, several
    kernels for the peers) are enqueued while the GPU is still busy: the event time is GPU time.
    A call whose host time (host_ms, reported) exceeds prefix_ms was not fully hidden, for
    example one that synchronises inside (FlashDeBERTa's varlen op reads cu_seqlens back)."""

    SLEEP_CYCLES = 2_000_000  # about 1 ms at the H200's 1.98 GHz

    def __init__(self):
        properties = torch.cuda.get_device_properties(torch.cuda.current_device())
        flush_bytes = max(4 * properties.L2_cache_size, 256 << 20)
        self.flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
        self.prefix_ms = statistics.median(self._elapsed_ms(self._prefix) for _ in range(5))

    def _prefix(self):
        torch.cuda._sleep(self.SLEEP_CYCLES)
        self.flush.zero_()

    @staticmethod
    def _elapsed_ms(fn):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop)

    def time(self, fn, repeats, warmups=3):
        """(median GPU ms, median host ms) of `repeats` timed calls of fn() after `warmups`
        untimed ones (peers_bench.py: the first calls compile the peers' Triton kernels)."""
        for _ in range(warmups):
            fn()
        torch.cuda.synchronize()
        times, host_times = [], []
        for _ in range(repeats):
            self._prefix()
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            enqueue_start = time.perf_counter()
            fn()
            host_times.append((time.perf_counter() - enqueue_start) * 1e3)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        return statistics.median(times), statistics.median(host_times)


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
    timer = ColdRunTimer()
    print(f"each timed call follows a GPU sleep and an L2 flush ({timer.prefix_ms:.3f} ms)",
          flush=True)
    with open(args.json, "w") as out:
        for dtype_name in args.dtypes.split(","):
            for head_dim in [int(x) for x in args.head_dims.split(",")]:
                heads = heads_for(head_dim)
                for length in [int(x) for x in args.lengths.split(",")]:
                    batch = max(1, args.tokens // length)
                    q, k, v = (torch.randn(batch, heads, length, head_dim, device="cuda",
                                           dtype=dtypes[dtype_name]) for _ in range(3))
                    row = {"L": length, "B": batch, "heads": heads, "head_dim": head_dim,
                           "dtype": dtype_name, "timing_prefix_ms": timer.prefix_ms}
                    for name, backend in (("sdpa_cudnn_ms", SDPBackend.CUDNN_ATTENTION),
                                          ("sdpa_flash_ms", SDPBackend.FLASH_ATTENTION)):
                        try:
                            with sdpa_kernel(backend):
                                row[name], host_ms = timer.time(
                                    lambda: F.scaled_dot_product_attention(q, k, v),
                                    args.repeats)
                            row[name.replace("_ms", "_host_ms")] = host_ms
                        except RuntimeError as error:
                            row[name] = None
                            row[name + "_error"] = str(error).splitlines()[0][:200]
                    print(json.dumps(row), flush=True)
                    out.write(json.dumps(row) + "\n")
                    del q, k, v
                    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
