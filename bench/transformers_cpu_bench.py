#!/usr/bin/env python3
"""The peer of dflash-bench-cpu: Hugging Face transformers' eager DeBERTa-v2 in float32 on the CPU,
timed on the same checkpoint, sequence length, batch size and thread count.

    python3 bench/transformers_cpu_bench.py --model DIR --seq_len 128 --batch 8 --threads 2
Needs torch and transformers (pip install torch transformers safetensors sentencepiece).
"""
import argparse
import json
import statistics
import time

import torch
from transformers import AutoModelForSequenceClassification


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--seq_len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    model = AutoModelForSequenceClassification.from_pretrained(args.model).eval()
    generator = torch.Generator().manual_seed(7)
    times = []
    with torch.inference_mode():
        for i in range(args.iterations + 1):
            ids = torch.randint(4, model.config.vocab_size, (args.batch, args.seq_len),
                                generator=generator)
            start = time.perf_counter()
            model(input_ids=ids)
            elapsed = time.perf_counter() - start
            if i > 0:
                times.append(elapsed)
    median = statistics.median(times)
    print(json.dumps({"peer": "transformers eager fp32", "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "seq_len": args.seq_len,
                      "batch": args.batch, "median_batch_s": median,
                      "tokens_per_s": args.seq_len * args.batch / median}, indent=2))


if __name__ == "__main__":
    main()
