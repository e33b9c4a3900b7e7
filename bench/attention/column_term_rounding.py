#!/usr/bin/env python3
"""What folding a saturated tile's column term into Q costs in accuracy (HISTORY.md v9.3, candidate
01-q-shift), on the CPU: one head of DeBERTa-v3 attention (256 buckets, 512 relative rows) with
N(0, 1) inputs rounded to the input type (BF16 or FP16), as dflash-bench-attention draws them,
against float64.

  v9.2-like  the kernel's roundings: P rounded to the input type before P V, band windows
             (C2P_win, P2C_win) rounded to it once, saturated column terms p_j = K_j . PosQ[s]
             exact;
  q-shift    the same, but on saturated pairs p_j comes from Q' = Q + PosQ[s] rounded to the
             input type: Q'_i . K_j = Q_i . K_j + p_j up to that rounding.

Prints the relative L2 error of each against float64 per length. Needs numpy.
Usage: column_term_rounding.py [--lengths 2048,4096] [--dtype bf16|fp16] [--head_dim 64] [--seed 1]
"""
import argparse
import sys

import numpy as np

SPAN = 256  # position_buckets: slots 0 .. 2 SPAN - 1
MAX_POSITION = 512


def to_bf16(x):
    """Round-to-nearest-even to bfloat16, returned as float32."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


def to_fp16(x):
    """Round-to-nearest-even to float16, returned as float32."""
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def slots(delta):
    """clamp(bucket(delta) + SPAN, 0, 2 SPAN - 1), bucket in transformers' float32 arithmetic
    (docs/deberta.md#log-buckets): |delta| <= SPAN / 2 maps to itself, larger ones to log
    buckets."""
    mid = SPAN // 2
    sign = np.sign(delta)
    magnitude = np.where((delta < mid) & (delta > -mid), mid - 1, np.abs(delta))
    ratio = magnitude.astype(np.float32) / np.float32(mid)
    log_position = np.ceil(np.log(ratio) / np.log(np.float32((MAX_POSITION - 1) / mid)) *
                           np.float32(mid - 1)).astype(np.int64) + mid
    bucket = np.where(magnitude <= mid, delta, log_position * sign)
    return np.clip(bucket + SPAN, 0, 2 * SPAN - 1)


def attention(scores, values, scale, rounded=None):
    scores = scores * scale
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    total = p.sum(axis=1, keepdims=True)
    if rounded is not None:
        p = rounded(p).astype(np.float64)
    return (p @ values) / total


def errors(length, head_dim, rng, rounded):
    q, k, v = (rounded(rng.standard_normal((length, head_dim))) for _ in range(3))
    pos_key, pos_query = (rounded(rng.standard_normal((2 * SPAN, head_dim))) for _ in range(2))
    q64, k64, v64 = q.astype(np.float64), k.astype(np.float64), v.astype(np.float64)
    delta = np.arange(length)[:, None] - np.arange(length)[None, :]
    slot = slots(delta)
    keys = np.broadcast_to(np.arange(length)[None, :], slot.shape)
    # Pairs of saturated 64 x 64 tiles, as the kernel classifies them: every delta of the tile
    # at the top slot (v3: >= 506) or at the bottom one (<= -512).
    tile_offset = 64 * (np.arange(length)[:, None] // 64 - np.arange(length)[None, :] // 64)
    high = tile_offset - 63 >= 506
    low = tile_offset + 63 <= -512
    saturated = high | low
    scale = 1.0 / np.sqrt(3.0 * head_dim)
    qk = q64 @ k64.T
    c2p = q64 @ pos_key.T.astype(np.float64)
    p2c = k64 @ pos_query.T.astype(np.float64)
    c2p_exact = np.take_along_axis(c2p, slot, axis=1)
    p2c_exact = p2c[keys, slot]
    reference = attention(qk + c2p_exact + p2c_exact, v64, scale)
    c2p_window = np.take_along_axis(rounded(c2p).astype(np.float64), slot, axis=1)
    p2c_window = rounded(p2c).astype(np.float64)[keys, slot]
    band = qk + np.where(saturated, c2p_exact, c2p_window) + np.where(saturated, p2c_exact,
                                                                      p2c_window)
    v92 = attention(band, v64, scale, rounded)
    shifted = {}
    for name, s in (("high", 2 * SPAN - 1), ("low", 0)):
        q_shift = rounded(q + pos_query[s]).astype(np.float64)
        shifted[name] = q_shift @ k64.T + c2p_exact
    folded = np.where(high, shifted["high"], np.where(low, shifted["low"], band))
    q_shift = attention(folded, v64, scale, rounded)

    def relative(x):
        return np.linalg.norm(x - reference) / np.linalg.norm(reference)

    return saturated.mean(), relative(v92), relative(q_shift)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", default="2048,4096",
                        help="comma-separated sequence lengths (one head each; 4096 takes ~1 min)")
    parser.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    parser.add_argument("--head_dim", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    try:
        lengths = [int(x) for x in args.lengths.split(",")]
    except ValueError:
        parser.error(f"--lengths: expected integers, got {args.lengths!r}")
    if any(n < 1 for n in lengths) or args.head_dim < 1:
        parser.error("lengths and --head_dim must be positive")
    rng = np.random.default_rng(args.seed)
    rounded = to_bf16 if args.dtype == "bf16" else to_fp16
    print(f"{args.dtype}: {'L':>6} {'saturated':>9} {'v9.2-like':>10} {'q-shift':>10}")
    for length in lengths:
        share, v92, q_shift = errors(length, args.head_dim, rng, rounded)
        print(f"{'':>{len(args.dtype) + 1}} {length:>6} {share:>9.2f} {v92:>10.2e} {q_shift:>10.2e}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
