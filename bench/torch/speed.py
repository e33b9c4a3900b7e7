#!/usr/bin/env python3
"""Speed of dflash_torch against stock transformers and the Triton peers, one GPU, one process.

  e2e          the whole MNLI-like set through a transformers sequence classifier (float16), in
               arrival order at --batches (8, 64): right-padded id batches built on the host
               beforehand (pinned); the timed pass copies each to the device, runs the model and
               keeps the logits; one copy of all logits to the host and a synchronize end it
               (bench/engine/hf_baseline.py's method). Variants (model_variants.py): stock eager,
               ours padded / packed, ours with the attention op skipped (ours_floor_s: the rest
               of the model, the floor of any attention-only replacement), ours padded with
               cuda_graphs=True (ours_graphs_s; ours_graphs_first_pass_s is its first timed pass,
               which records most of its graphs), ours packed with cuda_graphs=True (the same
               columns of the packed rows), DisentangledFlash 1.1.1 padded / packed,
               FlashDeBERTa 0.0.8;
               both packed variants build their layout from the pinned host mask (no device read).
               Seconds: the best of --repeats passes after a warm-up.
  compile      batches of 64 sorted by length, padded to multiples of 64: stock and ours
               (padded), eager and under torch.compile (same mode, --compile-mode), every shape
               compiled before timing.
  attention_op the op alone: BF16, 12 heads x 64, 16,384 tokens packed into sequences of L
               (128 .. 8192), Q / K / V strided views of one fused [T, 3 * 768] projection, v3
               positions, the built-in heuristic variant (DFLASH_PROFILE=none, as
               dflash-bench-attention), each call cold (a write of 4x the L2 before it, its host
               enqueue hidden behind that write: dflash-bench-attention's ColdRunTimer), median
               of --op-repeats; also the same forward through the C interface alone (capi_ms:
               arguments built once, no op dispatch). cxx_ms, dflash-bench-attention's time in
               the same run, is joined by make_results.py.

    python3 bench/torch/speed.py --model /tmp/dft/models/v3-base --pairs /tmp/dft/mnli_like.jsonl \
        --out /tmp/out/speed.json [--skip-e2e] [--skip-compile] [--skip-op]
"""
import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

import engine_common as common  # noqa: E402
from capi_forward import capi_forward  # noqa: E402
import model_variants  # noqa: E402
from dflash_torch import _native, ops  # noqa: E402
from dflash_torch.relative_positions import PositionSettings, build_slot_table  # noqa: E402

E2E_VARIANTS = ("stock", "ours_padded", "ours_packed", "ours_floor_padded", "ours_floor_packed",
                "ours_graphs_padded", "ours_graphs_packed", "df_padded", "df_packed", "fd")


def host_batches(sequences, batch, sort=False, multiple=1):
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i])) if sort \
        else list(range(len(sequences)))
    batches = []
    for start in range(0, len(order), batch):
        chosen = [sequences[i] for i in order[start:start + batch]]
        longest = -(-max(len(s) for s in chosen) // multiple) * multiple
        ids = torch.zeros(len(chosen), longest, dtype=torch.long)
        mask = torch.zeros(len(chosen), longest, dtype=torch.long)
        for row, seq in enumerate(chosen):
            ids[row, :len(seq)] = torch.tensor(seq)
            mask[row, :len(seq)] = 1
        batches.append((ids.pin_memory(), mask.pin_memory()))
    return batches


def timed_pass(run, batches):
    torch.cuda.synchronize()
    start = time.perf_counter()
    outputs = [run(ids.cuda(non_blocking=True), mask.cuda(non_blocking=True), mask)
               for ids, mask in batches]
    torch.cat(outputs).float().cpu()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def passes(run, batches, repeats, warmup):
    with torch.inference_mode():
        for ids, mask in batches[:warmup]:
            run(ids.cuda(), mask.cuda(), mask)
        return [timed_pass(run, batches) for _ in range(repeats)]


def measure_passes(name, make, batches, repeats, warmup, errors):
    """Seconds of each timed pass after `warmup` batches, or None where the variant failed."""
    try:
        seconds = passes(make(), batches, repeats, warmup)
        print(f"  {name}: best {min(seconds):.3f} s, passes "
              f"{', '.join(f'{s:.3f}' for s in seconds)}", flush=True)
        return seconds
    except Exception as error:  # a peer that cannot run here is reported, not fatal
        errors[name] = f"{type(error).__name__}: {error}"
        print(f"  {name}: failed: {errors[name]}", flush=True)
        traceback.print_exc()
        return None
    finally:
        torch.cuda.empty_cache()


def measure(name, make, batches, repeats, warmup, errors):
    """The best pass's seconds, or None."""
    seconds = measure_passes(name, make, batches, repeats, warmup, errors)
    return None if seconds is None else min(seconds)


def e2e_rows(model, sequences, batch_sizes, repeats, errors):
    rows = []
    for batch in batch_sizes:
        print(f"e2e mnli_like batch {batch}", flush=True)
        batches = host_batches(sequences, batch)
        lengths = {ids.shape[1] for ids, _ in batches}
        timed = {name: measure_passes(f"{name} b{batch}",
                                      lambda name=name: model_variants.make(name, model, lengths),
                                      batches, repeats, 4, errors)
                 for name in E2E_VARIANTS}
        seconds = {name: None if t is None else min(t) for name, t in timed.items()}
        for layout in ("padded", "packed"):
            graphed = timed[f"ours_graphs_{layout}"]
            rows.append({"workload": "mnli_like", "batch": batch, "layout": layout,
                         "eager_s": seconds["stock"], "df_s": seconds[f"df_{layout}"],
                         "fd_s": seconds["fd"], "ours_s": seconds[f"ours_{layout}"],
                         "ours_floor_s": seconds[f"ours_floor_{layout}"],
                         "ours_graphs_s": seconds[f"ours_graphs_{layout}"],
                         "ours_graphs_first_pass_s": graphed[0] if graphed else None,
                         "compiled_s": None, "ours_compiled_s": None})
    return rows


def compile_row(model, sequences, mode, repeats, errors):
    print(f"compile (mode {mode}): batches of 64 sorted, padded to multiples of 64", flush=True)
    torch._dynamo.config.cache_size_limit = 64
    batches = host_batches(sequences, 64, sort=True, multiple=64)
    shapes = {tuple(ids.shape): (ids, mask) for ids, mask in batches}
    row = {"workload": "mnli_like_sorted_pad64", "batch": 64, "layout": "padded"}

    def compiled(name):
        run = model_variants.make(name, model)
        compiled_run = torch.compile(run, mode=mode)
        with torch.inference_mode():
            for ids, mask in shapes.values():  # every shape compiled before timing, called
                compiled_run(ids.cuda(), mask.cuda(), mask)  # as timed_pass calls it
        return compiled_run

    row["eager_s"] = measure("stock eager", lambda: model_variants.make("stock", model), batches,
                             repeats, 2, errors)
    row["ours_s"] = measure("ours eager", lambda: model_variants.make("ours_padded", model),
                            batches, repeats, 2, errors)
    row["compiled_s"] = measure("stock compiled", lambda: compiled("stock"), batches, repeats, 0,
                                errors)
    row["ours_compiled_s"] = measure("ours compiled", lambda: compiled("ours_padded"), batches,
                                     repeats, 0, errors)
    row["df_s"] = row["fd_s"] = None
    row["compile_mode"] = mode
    return row


class ColdTimer:
    """CUDA events around each call, after a write of 4x the L2 (>= 256 MiB) and a spin of the
    GPU that hide the call's host enqueue (dflash-bench-attention's ColdRunTimer). The flush alone
    (about 80 us on an H200) does not cover a Python op's 90-110 us of host time: the start event
    then waits for the launch and counts it."""

    HIDE_CYCLES = 1_000_000  # torch.cuda._sleep: about 0.5 ms at H100 / H200 clocks.

    def __init__(self):
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.flush = torch.empty(max(4 * l2, 256 << 20), dtype=torch.uint8, device="cuda")

    def time(self, run, repeats):
        times = []
        for i in range(repeats + 3):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.flush.fill_(i & 0xFF)
            torch.cuda._sleep(self.HIDE_CYCLES)
            start.record()
            run()
            stop.record()
            stop.synchronize()
            if i >= 3:
                times.append(start.elapsed_time(stop))
        return statistics.median(times)


def attention_op_rows(lengths, repeats, tokens=16384, heads=12, head_dim=64):
    os.environ["DFLASH_PROFILE"] = "none"
    ops.tuning = ops._Tuning()  # forget profiles read by the e2e rows: the heuristic runs
    width = heads * head_dim
    table = build_slot_table(PositionSettings(span=256, position_buckets=256,
                                              max_relative_positions=512))
    positions_id = ops.register_slot_table(table)
    slot_table = torch.tensor(table.table, dtype=torch.int32, device="cuda")
    timer = ColdTimer()
    library = _native.require()
    rows = []
    for length in lengths:
        batch = max(1, tokens // length)
        total = batch * length
        qkv = torch.randn(total, 3 * width, device="cuda").to(torch.bfloat16)
        q, k, v = qkv[:, :width], qkv[:, width:2 * width], qkv[:, 2 * width:]
        pos_key = torch.randn(512, width, device="cuda").to(torch.bfloat16)
        pos_query = torch.randn(512, width, device="cuda").to(torch.bfloat16)
        cu = torch.arange(0, total + 1, length, dtype=torch.int32, device="cuda")
        scale = 1.0 / (3 * head_dim) ** 0.5

        def run():
            ops.attention_packed(q, k, v, pos_key, pos_query, slot_table, positions_id, cu, length,
                                 heads, scale, False)

        # The same forward through the C interface alone (arguments built once, no op dispatch).
        run_capi = capi_forward(library, q, k, v, pos_key, pos_query, table, slot_table, heads,
                                head_dim, scale, cu_seqlens=cu, max_seqlen=length)
        host = []
        for _ in range(5):
            start = time.perf_counter()
            run()
            host.append((time.perf_counter() - start) * 1e3)
        op_ms = timer.time(run, repeats)
        capi_ms = timer.time(run_capi, repeats)
        rows.append({"L": length, "B": batch, "op_ms": op_ms, "cxx_ms": None,
                     "capi_ms": capi_ms, "op_host_ms": statistics.median(host)})
        print(f"attention op L={length}: {op_ms:.4f} ms, C interface {capi_ms:.4f} ms "
              f"(op host {statistics.median(host):.3f} ms)", flush=True)
    os.environ.pop("DFLASH_PROFILE")
    return rows


def workload_parser(doc):
    """An argument parser with the MNLI-like workload's arguments: --model (a checkpoint folder),
    --pairs (the pairs' JSON lines) and --out (the result JSON)."""
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--pairs", required=True)
    parser.add_argument("--out", required=True)
    return parser


def main():
    parser = workload_parser(__doc__)
    parser.add_argument("--batches", default="8,64")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--compile-mode", default="default")
    parser.add_argument("--op-lengths", default="128,256,512,1024,2048,4096,8192")
    parser.add_argument("--op-repeats", type=int, default=30)
    parser.add_argument("--skip-e2e", action="store_true")
    parser.add_argument("--skip-compile", action="store_true")
    parser.add_argument("--skip-op", action="store_true")
    args = parser.parse_args()
    sequences = common.read_pairs(args.pairs)
    result = {"gpu": torch.cuda.get_device_name(0), "versions": model_variants.peer_versions(),
              "dtype": "fp16", "pairs": len(sequences), "errors": {}}
    model = None
    if not (args.skip_e2e and args.skip_compile):
        model = model_variants.load_classifier(args.model, "cuda", torch.float16)
    if not args.skip_e2e:
        result["e2e"] = e2e_rows(model, sequences, [int(b) for b in args.batches.split(",")],
                                 args.repeats, result["errors"])
    if not args.skip_compile:
        result["compile"] = [compile_row(model, sequences, args.compile_mode, args.repeats,
                                         result["errors"])]
    if not args.skip_op:
        result["attention_op"] = attention_op_rows(
            [int(x) for x in args.op_lengths.split(",")], args.op_repeats)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
