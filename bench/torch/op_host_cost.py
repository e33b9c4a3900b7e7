#!/usr/bin/env python3
"""Host cost of one dflash_torch attention call, piece by piece, on one GPU.

In eager PyTorch at small batches (the MNLI-like set at batch 8) the GPU finishes an attention
call long before the host has issued the next, so the op's host time, not its kernel, is what
the end-to-end time pays. This times, on a padded v3-base-shaped layer (BF16, 12 heads x 64,
--batch sequences of --length tokens, Q / K / V views of one fused projection, v3 positions):

  op           torch.ops.dflash.attention_padded through the dispatcher
  run_padded   the entry DeBERTa's patched layers call (ops.run_padded: in eager CUDA use the
               implementation without the dispatcher; where the package predates it, n/a)
  forward      the op's implementation called directly
  capi         the C interface's forward alone, arguments built once (the launch itself)
  and the pieces the implementation uses: a CUDA torch.empty, torch.cuda.current_stream,
  torch.cuda.device as a context, the C interface's workspace_bytes.

Each figure is the median over --calls calls of the host time of one call (time.perf_counter
around it, no synchronisation; the GPU keeps up at these shapes). Prints a table and writes JSON.

    python3 bench/torch/op_host_cost.py --out /tmp/out/op_host_cost.json
"""
import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from capi_forward import capi_forward
from dflash_torch import _native, ops
from dflash_torch.relative_positions import PositionSettings, build_slot_table


def median_us(call, calls: int) -> float:
    for _ in range(20):
        call()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return statistics.median(samples) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--calls", type=int, default=2000)
    args_in = parser.parse_args()

    heads, head_dim = 12, 64
    width = heads * head_dim
    batch, length = args_in.batch, args_in.length
    qkv = torch.randn(batch, length, 3 * width, device="cuda").to(torch.bfloat16)
    q, k, v = qkv.chunk(3, dim=-1)
    pos_key = torch.randn(512, width, device="cuda").to(torch.bfloat16)
    pos_query = torch.randn(512, width, device="cuda").to(torch.bfloat16)
    table = build_slot_table(PositionSettings(span=256, position_buckets=256,
                                              max_relative_positions=512))
    positions_id = ops.register_slot_table(table)
    slot_table = torch.tensor(table.table, dtype=torch.int32, device="cuda")
    key_mask = torch.ones(batch, length, dtype=torch.bool, device="cuda")
    scale = 1.0 / (3 * head_dim) ** 0.5
    library = _native.require()

    def op():
        torch.ops.dflash.attention_padded(q, k, v, pos_key, pos_query, slot_table, positions_id,
                                          key_mask, heads, scale, False)

    run_padded = getattr(ops, "run_padded", None)

    def entry():
        run_padded(q, k, v, pos_key, pos_query, slot_table, positions_id, key_mask, heads, scale,
                   False)

    def forward():
        ops._forward(q, k, v, pos_key, pos_query, slot_table, positions_id, heads, scale, False,
                     key_mask=key_mask)

    capi = capi_forward(library, q, k, v, pos_key, pos_query, table, slot_table, heads, head_dim,
                        scale, key_mask=key_mask)

    def device_context():
        with torch.cuda.device(q.device):
            pass

    pieces = {
        "op": op,
        "run_padded": entry if run_padded is not None else None,
        "forward": forward,
        "capi": capi,
        "torch_empty_cuda": lambda: torch.empty(q.shape, dtype=q.dtype, device=q.device),
        "current_stream": lambda: torch.cuda.current_stream(q.device).cuda_stream,
        "cuda_device_context": device_context,
        "workspace_bytes": lambda: library.workspace_bytes(capi.args),
    }
    results = {}
    with torch.inference_mode():
        for name, call in pieces.items():
            results[name] = round(median_us(call, args_in.calls), 2) if call else None
            print(f"{name:22s} {results[name] if call else 'n/a':>8} us", flush=True)
    report = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "package": str(Path(ops.__file__).parent),
              "shape": {"batch": batch, "length": length, "heads": heads, "head_dim": head_dim,
                        "dtype": "bf16", "layout": "padded"},
              "calls": args_in.calls, "host_us_median": results}
    with open(args_in.out, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
