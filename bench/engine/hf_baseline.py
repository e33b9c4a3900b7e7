#!/usr/bin/env python3
"""The Hugging Face transformers baseline of the CUDA engine benchmark: the eager
DebertaV2ForSequenceClassification (the only attention implementation DeBERTa-v2 has in
transformers 5.17) on the same checkpoint and pairs, plus the reference logits for parity.

    python3 bench/engine/hf_baseline.py --model /tmp/dfe/models/v3-base \
        --pairs /tmp/dfe/mnli_like.jsonl --out /tmp/dfe/hf.json --device cuda --dtype fp16 \
        --parity-count 512 --parity-out /tmp/dfe/parity

Measures, all under torch.inference_mode(), model load excluded:
  mnli_like   the whole pair file at batch 8, batch 64, and batch 64 after sorting by length:
              right-padded to each batch's longest, with attention_mask. Padded id tensors are
              built on the host beforehand; the timed loop copies them to the device, runs the
              model and keeps the logits on the device; one copy of all logits to the host and a
              synchronize end it. A warm-up of a few batches precedes each timing.
  single_128  one 128-token sequence (host->device copy included): median ms of --single-runs.
  long        one or more sequences of 8192 tokens (--long, e.g. 8192x1,8192x4): median ms of
              --long-runs, and the peak of torch.cuda.max_memory_allocated in GiB, total and
              minus what was allocated before the forward (activations). --skip-long skips it.
  parity      with --parity-out PREFIX: logits of the first --parity-count pairs in float32 and
              in --dtype (padded batches of --parity-batch), written as PREFIX.hf_fp32.f32 and
              PREFIX.hf_<dtype>.f32 ([N, num_labels] little-endian float32), and the last hidden
              state of pairs 0..--hidden-count-1 (valid rows only, concatenated) as
              PREFIX.hf_hidden_fp32.f32 / PREFIX.hf_hidden_<dtype>.f32 with PREFIX.hidden.json
              (pairs, lengths, row offsets, hidden_size). The float32 reference runs with TF32
              off (matmul and cuDNN), before the model is cast to --dtype.
  sequences  with --sequences FILE (JSON Lines of {"ids": [...]}, e.g. single sequences of 128 ..
              16384 tokens): each sequence alone, in --dtype, median ms of --sequence-runs after
              one untimed run (host->device copy and logits back included), the peak memory, and
              its logits, written to --sequence-logits as [N, num_labels] float32. With
              --ours-sequence-logits (dflash-bench-engine --sequence_logits on the same file),
              each row's relative L2 error of ours against these logits. A sequence that runs out
              of memory gets ms null. Without --pairs only this section runs.
The JSON at --out holds every figure, the environment and the errors of transformers' own
--dtype run against its float32 run. Progress goes to stderr. TF32 stays off throughout (matmul
and cuDNN): --dtype fp32 is transformers' strict float32.
"""
import argparse
import json
import platform
import statistics
import time

import numpy as np
import torch
import transformers
from transformers import AutoModelForSequenceClassification

import engine_common as common

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def synchronize(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def host_batches(sequences, batch, sort):
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i])) if sort \
        else list(range(len(sequences)))
    batches = []
    for start in range(0, len(order), batch):
        ids, mask = common.pad_batch([sequences[i] for i in order[start:start + batch]], "cpu")
        batches.append((ids.pin_memory() if torch.cuda.is_available() else ids,
                        mask.pin_memory() if torch.cuda.is_available() else mask))
    return batches


def run_batches(model, batches, device):
    outputs = []
    for ids, mask in batches:
        outputs.append(model(input_ids=ids.to(device, non_blocking=True),
                             attention_mask=mask.to(device, non_blocking=True)).logits)
    return torch.cat(outputs).float().cpu()


def time_set(model, sequences, batch, sort, device, warmup_batches):
    batches = host_batches(sequences, batch, sort)
    run_batches(model, batches[:warmup_batches], device)
    synchronize(device)
    start = time.perf_counter()
    run_batches(model, batches, device)
    synchronize(device)
    seconds = time.perf_counter() - start
    padded = sum(ids.numel() for ids, _ in batches)
    common.log(f"mnli_like batch {batch}{' sorted' if sort else ''}: {seconds:.3f} s "
               f"({len(sequences) / seconds:.1f} seq/s, {padded} padded tokens)")
    return seconds, padded


def time_one(model, ids, device, runs, warmup):
    times = []
    for i in range(warmup + runs):
        synchronize(device)
        start = time.perf_counter()
        model(input_ids=ids.to(device, non_blocking=True)).logits.float().cpu()
        synchronize(device)
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def random_ids(length, count, seed):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(common.FIRST_PIECE_ID, common.LAST_PIECE_ID + 1, (count, length),
                        generator=generator)
    ids[:, 0] = common.CLS_ID
    ids[:, -1] = common.SEP_ID
    return ids


def measure_long(model, length, count, device, runs):
    ids = random_ids(length, count, seed=length + count)
    row = {"length": length, "sequences": count}
    try:
        synchronize(device)
        before = torch.cuda.memory_allocated() if device.startswith("cuda") else 0
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        row["ms"] = time_one(model, ids, device, runs, warmup=1)
        if device.startswith("cuda"):
            peak = torch.cuda.max_memory_allocated()
            row["peak_gib"] = peak / 2**30
            row["activation_peak_gib"] = (peak - before) / 2**30
    except torch.cuda.OutOfMemoryError as error:
        row["ms"] = None
        row["error"] = str(error).splitlines()[0][:200]
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    common.log(f"long {count} x {length}: {row}")
    return row


def measure_sequences(model, sequences, device, runs, ours_logits):
    """Each sequence alone: median ms, peak memory, logits; errors against `ours_logits`."""
    rows, logits = [], []
    for index, sequence in enumerate(sequences):
        ids = torch.tensor([sequence], dtype=torch.long)
        row = {"tokens": len(sequence)}
        try:
            if device.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats()
            with torch.inference_mode():
                out = model(input_ids=ids.to(device)).logits.float().cpu().numpy()[0]
                row["ms"] = time_one(model, ids, device, runs, warmup=0)
            if device.startswith("cuda"):
                row["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
        except torch.cuda.OutOfMemoryError as error:
            out = np.full(model.config.num_labels, np.nan, dtype=np.float32)
            row["ms"] = None
            row["error"] = str(error).splitlines()[0][:200]
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        logits.append(out)
        if ours_logits is not None and np.all(np.isfinite(out)):
            ours = ours_logits[index]
            row["rel_l2_err"] = float(np.linalg.norm(ours - out) / max(np.linalg.norm(out), 1e-30))
            row["max_abs_err"] = float(np.max(np.abs(ours - out)))
        common.log(f"sequence of {len(sequence)} tokens: {row}")
        rows.append(row)
    return rows, np.stack(logits).astype(np.float32)


def parity_logits(model, sequences, batch, device):
    batches = [common.pad_batch(sequences[i:i + batch], device)
               for i in range(0, len(sequences), batch)]
    with torch.inference_mode():
        return torch.cat([model(input_ids=ids, attention_mask=mask).logits.float()
                          for ids, mask in batches]).cpu().numpy()


def parity_hidden(model, sequences, device):
    ids, mask = common.pad_batch(sequences, device)
    with torch.inference_mode():
        hidden = model.deberta(input_ids=ids, attention_mask=mask).last_hidden_state.float()
    return np.concatenate([hidden[row, :len(seq)].cpu().numpy()
                           for row, seq in enumerate(sequences)])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="checkpoint folder")
    parser.add_argument("--pairs", default=None,
                        help="JSON Lines of {\"ids\": [...]} (required unless --sequences)")
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp16")
    parser.add_argument("--batches", default="8,64", help="batch sizes timed in arrival order")
    parser.add_argument("--sorted-batch", type=int, default=64,
                        help="batch size timed after sorting by length (0: skip)")
    parser.add_argument("--warmup-batches", type=int, default=4)
    parser.add_argument("--single-length", type=int, default=128)
    parser.add_argument("--single-runs", type=int, default=50)
    parser.add_argument("--long", default="8192x1,8192x4",
                        help="LENGTHxCOUNT list of long-sequence measurements")
    parser.add_argument("--long-runs", type=int, default=3)
    parser.add_argument("--skip-long", action="store_true")
    parser.add_argument("--parity-count", type=int, default=512)
    parser.add_argument("--parity-batch", type=int, default=64)
    parser.add_argument("--hidden-count", type=int, default=8)
    parser.add_argument("--parity-out", default=None, help="PREFIX of the raw parity files")
    parser.add_argument("--sequences", default=None,
                        help="JSON Lines of {\"ids\": [...]}: each sequence timed alone")
    parser.add_argument("--sequence-runs", type=int, default=3)
    parser.add_argument("--sequence-logits", default=None,
                        help="write the --sequences logits here ([N, num_labels] float32)")
    parser.add_argument("--ours-sequence-logits", default=None,
                        help="dflash-bench-engine's logits of the same --sequences, to compare")
    args = parser.parse_args()
    if args.pairs is None and args.sequences is None:
        parser.error("--pairs or --sequences is required")
    device = args.device
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sequences = common.read_pairs(args.pairs) if args.pairs else []
    if args.pairs:
        common.log(f"{args.pairs}: {json.dumps(common.length_stats(sequences))}")

    start = time.perf_counter()
    model = AutoModelForSequenceClassification.from_pretrained(
        args.model, attn_implementation="eager", dtype=torch.float32).to(device).eval()
    load_s = time.perf_counter() - start
    config = model.config
    result = {
        "environment": {"torch": torch.__version__, "transformers": transformers.__version__,
                        "python": platform.python_version(), "device": device,
                        "gpu": torch.cuda.get_device_name() if device.startswith("cuda") else None},
        "model": {"dir": args.model, "hidden_size": config.hidden_size,
                  "layers": config.num_hidden_layers, "heads": config.num_attention_heads,
                  "intermediate_size": config.intermediate_size,
                  "conv_kernel_size": getattr(config, "conv_kernel_size", 0),
                  "num_labels": config.num_labels,
                  "parameters": sum(p.numel() for p in model.parameters()),
                  "attn_implementation": config._attn_implementation, "load_s": load_s},
        "dtype": args.dtype,
        "tf32": {"matmul": torch.backends.cuda.matmul.allow_tf32,
                 "cudnn": torch.backends.cudnn.allow_tf32},
    }
    if sequences:
        result["pairs_stats"] = common.length_stats(sequences)

    if args.sequences:
        singles = common.read_pairs(args.sequences)
        ours = None
        if args.ours_sequence_logits:
            ours = np.fromfile(args.ours_sequence_logits, dtype="<f4").reshape(
                len(singles), config.num_labels)
        model.to(DTYPES[args.dtype])
        rows, logits = measure_sequences(model, singles, device, args.sequence_runs, ours)
        result["sequences"] = rows
        if args.sequence_logits:
            common.write_f32(args.sequence_logits, logits)
        model.to(torch.float32)
    if not sequences:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
        print(json.dumps(result, indent=2))
        return

    if args.parity_out:
        count = min(args.parity_count, len(sequences))
        subset = sequences[:count]
        hidden_subset = sequences[:min(args.hidden_count, count)]
        common.log(f"parity: float32 logits of {count} pairs, hidden of {len(hidden_subset)}")
        ref_logits = parity_logits(model, subset, args.parity_batch, device)
        ref_hidden = parity_hidden(model, hidden_subset, device)
        model.to(DTYPES[args.dtype])
        test_logits = parity_logits(model, subset, args.parity_batch, device)
        test_hidden = parity_hidden(model, hidden_subset, device)
        prefix = args.parity_out
        common.write_f32(f"{prefix}.hf_fp32.f32", ref_logits)
        common.write_f32(f"{prefix}.hf_{args.dtype}.f32", test_logits)
        common.write_f32(f"{prefix}.hf_hidden_fp32.f32", ref_hidden)
        common.write_f32(f"{prefix}.hf_hidden_{args.dtype}.f32", test_hidden)
        common.write_hidden_index(prefix, range(len(hidden_subset)),
                                  [len(s) for s in hidden_subset], config.hidden_size)
        result["parity"] = {"pairs": count, "hidden_pairs": len(hidden_subset),
                            "prefix": prefix,
                            f"hf_{args.dtype}_vs_fp32_logits":
                                common.relative_errors(test_logits, ref_logits),
                            f"hf_{args.dtype}_vs_fp32_hidden":
                                common.relative_errors(test_hidden, ref_hidden)}
        common.log(f"parity: {json.dumps(result['parity'])}")
    model.to(DTYPES[args.dtype])

    with torch.inference_mode():
        mnli = {"pairs": len(sequences)}
        for batch in [int(b) for b in args.batches.split(",") if b]:
            mnli[f"batch{batch}_s"], mnli[f"batch{batch}_padded_tokens"] = time_set(
                model, sequences, batch, False, device, args.warmup_batches)
        if args.sorted_batch > 0:
            key = f"batch{args.sorted_batch}_sorted"
            mnli[key + "_s"], mnli[key + "_padded_tokens"] = time_set(
                model, sequences, args.sorted_batch, True, device, args.warmup_batches)
        result["mnli_like"] = mnli

        single = random_ids(args.single_length, 1, seed=args.single_length)
        result["single"] = {"length": args.single_length, "runs": args.single_runs,
                            "ms": time_one(model, single, device, args.single_runs, warmup=5)}
        common.log(f"single {args.single_length}: {result['single']['ms']:.2f} ms")

        if not args.skip_long:
            result["long"] = []
            for item in [x for x in args.long.split(",") if x]:
                length, count = (int(v) for v in item.split("x"))
                result["long"].append(measure_long(model, length, count, device,
                                                   args.long_runs))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
