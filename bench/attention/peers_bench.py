#!/usr/bin/env python3
"""The Triton peers beside dflash-bench-attention, measured in the same device run: FlashDeBERTa
0.0.8 (FD) and DisentangledFlash 1.1.1 (DF) on the shapes of sdpa_bench.py, timed the same way
(CUDA events, warm-up, median, each call cold and its host launches hidden: ColdRunTimer; a
layout's <peer>_<layout>_host_ms above timing_prefix_ms means they were not all hidden).

What is timed is the attention op only, forward, inference, no dropout: given Q, K, V and the
projected relative embeddings PosK, PosQ ([H, 2 * 256, d]; DF's layer caches them, FD's projects
them before calling its op), each peer's own C2P/P2C GEMMs and its fused kernel, with DeBERTa-v3
settings (position_buckets 256, max_relative_positions 512, c2p|p2c, scale 1/sqrt(3 d)), all
tokens valid. By default each peer runs in both of its layouts and the faster one is reported
(fd_ms / df_ms, named by fd_layout / df_layout; the per-layout times stay in the row):
  FD padded  flash_attention_with_disentangled: [B, H, L, d] contiguous, no seq_lengths (what
             FD's own layer runs when the mask is all ones)
  FD varlen  flash_attention_with_disentangled_varlen: [T, H, d] contiguous, cu_seqlens
  DF padded  the padded kernel without a mask (DF's assume_unpadded): [B, H, L, d] views of a
             fused [T, 3 H d] QKV projection
  DF packed  the cu_seqlens kernel (DF's forward_packed): [H, T, d] views of the same buffer
DF's launch configuration is its built-in heuristic, which is also what its default "auto" mode
falls back to here (its bundled H200 profile needs torch 2.14 / Triton 3.8); FD uses its default
tile configuration unless FLASHDEBERTA_FWD_* is set. Both are recorded as fd_config / df_config.

With --mixes_from (dflash-bench-attention's JSON lines of the same run), the peers also run the
mixed batches found there (rows with "seqlens": the packed MNLI-like mix), on the same sequence
lengths, in their packed layouts only (FD varlen, DF packed); those rows keep the bench's "shape".

Accuracy: relative L2 error of each peer's output against a float64 torch reference of the exact
math on the same (rounded) inputs, for L <= --accuracy_max_length (null above).

    python3 bench/attention/peers_bench.py --json peers.jsonl [--lengths 128,...]
        [--dtypes bf16,fp16] [--head_dims 64] [--layouts padded,packed] [--mixes_from ours.jsonl]
        [--smoke]
"""
import argparse
import importlib.metadata
import json
import math
import time

import torch

# The SDPA ceiling's timing, shapes and options (this script's folder).
from sdpa_bench import ColdRunTimer, add_shape_arguments, heads_for

POSITION_BUCKETS = 256  # DeBERTa-v3: log buckets on, att_span = 256
MAX_RELATIVE_POSITIONS = 512
ATT_SPAN = POSITION_BUCKETS
RELATIVE_ROWS = 2 * ATT_SPAN
DF_MAX_LENGTH = 8192  # DF's bounded kernel families stop here (its prepare_shape rejects more)


def error_line(error):
    text = f"{type(error).__name__}: {error}".strip()
    return text.splitlines()[0][:200]


def relative_position_slots(length, device):
    """slot[i, j] = clamp(bucket(i - j) + 256, 0, 511), bucket being transformers'
    make_log_bucket_position(i - j, bucket_size=256, max_position=512), in its float32 arithmetic.
    C2P reads PosK at slot[i, j]; P2C reads PosQ at slot[i, j] too (HF indexes P2C with
    -bucket(j - i), and the bucket is odd), so the score bias is C2P[i, slot] + P2C[j, slot]."""
    deltas = torch.arange(-(length - 1), length, dtype=torch.int64)
    mid = POSITION_BUCKETS // 2
    magnitude = deltas.abs()
    # Below mid the bucket is the distance itself; the log formula sees mid - 1 there.
    log_input = torch.where(magnitude < mid, torch.full_like(magnitude, mid - 1), magnitude)
    log_scale = torch.log(torch.tensor((MAX_RELATIVE_POSITIONS - 1) / mid))
    log_bucket = torch.ceil(torch.log(log_input / mid) / log_scale * (mid - 1)) + mid
    bucket = torch.where(log_input <= mid, deltas.to(log_bucket.dtype),
                         log_bucket * torch.sign(deltas))
    slot_of_delta = torch.clamp(bucket.to(torch.int64) + ATT_SPAN, 0, RELATIVE_ROWS - 1)
    positions = torch.arange(length)
    pair_delta = positions[:, None] - positions[None, :] + (length - 1)
    return slot_of_delta[pair_delta].to(device)


def reference_attention(query, key, value, pos_key, pos_query, seqlens):
    """The DeBERTa math in float64, one sequence at a time: query/key/value [T, H, d] holding the
    sequences of `seqlens` one after the other, pos_key/pos_query [H, 512, d]. Returns [T, H, d]
    float64."""
    pos_key, pos_query = pos_key.double(), pos_query.double()
    scale = 1.0 / math.sqrt(3 * query.shape[-1])
    outputs = []
    start = 0
    for length in seqlens:
        q, k, v = (x[start:start + length].double().transpose(0, 1) for x in (query, key, value))
        start += length
        heads = q.shape[0]
        slots = relative_position_slots(length, query.device)
        c2p_index = slots.expand(heads, length, length)
        p2c_index = slots.t().expand(heads, length, length)
        # c2p[i, j] = C2P[i, slot[i, j]]; p2c[j, i] = P2C[j, slot[i, j]], transposed below.
        c2p = torch.gather(q @ pos_key.transpose(1, 2), 2, c2p_index)
        p2c = torch.gather(k @ pos_query.transpose(1, 2), 2, p2c_index)
        scores = (q @ k.transpose(1, 2) + c2p + p2c.transpose(1, 2)) * scale
        outputs.append((torch.softmax(scores, dim=-1) @ v).transpose(0, 1))
        del c2p, p2c, scores
    return torch.cat(outputs)


class Inputs:
    """One batch's operands, in the dtype under test: a fused QKV projection [T, 3, H, d] (the
    layout of ours and of DF's layer) and the projected relative embeddings [H, 512, d]. `seqlens`
    are the sequences' lengths (all equal: a uniform batch, which the padded layouts need)."""

    def __init__(self, seqlens, heads, head_dim, dtype, device="cuda"):
        self.seqlens = list(seqlens)
        self.batch, self.length = len(self.seqlens), max(self.seqlens)
        self.uniform = all(length == self.length for length in self.seqlens)
        self.heads, self.head_dim, self.dtype = heads, head_dim, dtype
        tokens = sum(self.seqlens)
        self.qkv = torch.randn(tokens, 3, heads, head_dim, device=device, dtype=dtype)
        self.pos_key = torch.randn(heads, RELATIVE_ROWS, head_dim, device=device, dtype=dtype)
        self.pos_query = torch.randn(heads, RELATIVE_ROWS, head_dim, device=device, dtype=dtype)
        offsets = [0]
        for length in self.seqlens:
            offsets.append(offsets[-1] + length)
        self.cu_seqlens = torch.tensor(offsets, device=device, dtype=torch.int32)
        self.scale = 1.0 / math.sqrt(3 * head_dim)

    def tokens_heads_dim(self, which):
        """[T, H, d] strided view of Q (0), K (1) or V (2) inside the fused buffer."""
        return self.qkv[:, which]

    def batch_heads_length_dim(self, which):
        """[B, H, L, d] strided view of Q, K or V inside the fused buffer (uniform batches)."""
        if not self.uniform:
            raise ValueError("the padded layouts run uniform batches only")
        view = self.qkv[:, which].view(self.batch, self.length, self.heads, self.head_dim)
        return view.permute(0, 2, 1, 3)

    def to_common_layout(self, output):
        """Any peer output ([B, L, H, d] or [T, H, d] in memory order), as [T, H, d]."""
        return output.reshape(-1, self.heads, self.head_dim)

    def reference(self):
        return reference_attention(*(self.tokens_heads_dim(i) for i in range(3)), self.pos_key,
                                   self.pos_query, self.seqlens)


class FlashDeberta:
    """FlashDeBERTa 0.0.8 at its op level (flashdeberta.ops.*). Both functions take the position
    tables as [1, H, 512, d] and run q @ PosK^T, k @ PosQ^T over all 512 slots themselves."""

    name = "fd"
    package = "flashdeberta"
    layouts = {"padded": "padded", "packed": "varlen"}

    def __init__(self):
        from flashdeberta.ops import config
        from flashdeberta.ops.flash_attention import flash_attention_with_disentangled
        from flashdeberta.ops.flash_attention_varlen import (
            flash_attention_with_disentangled_varlen)
        self.forward_config = config.forward_config
        self.padded_op = flash_attention_with_disentangled
        self.varlen_op = flash_attention_with_disentangled_varlen

    def config(self, inputs):
        block_m, block_n, stages, warps = self.forward_config(inputs.head_dim)
        return f"{block_m}x{block_n}/{warps}w/{stages}s"

    def prepare(self, layout, inputs):
        """Returns (call, to_common_layout); layout copies happen here, outside the timing."""
        pos_key = inputs.pos_key.unsqueeze(0)
        pos_query = inputs.pos_query.unsqueeze(0)
        if layout == "padded":
            # seq_lengths=None: every row of the [B, H, L, d] batch is valid.
            q, k, v = (inputs.batch_heads_length_dim(i).contiguous() for i in range(3))

            def call():
                return self.padded_op(q, k, v, None, pos_key, pos_query, False, inputs.scale,
                                      POSITION_BUCKETS, MAX_RELATIVE_POSITIONS)

            return call, lambda out: inputs.to_common_layout(out.permute(0, 2, 1, 3))
        q, k, v = (inputs.tokens_heads_dim(i).contiguous() for i in range(3))
        length = inputs.length

        def call():
            return self.varlen_op(q, k, v, pos_key, pos_query, inputs.cu_seqlens, inputs.cu_seqlens,
                                  length, length, False, inputs.scale, POSITION_BUCKETS,
                                  MAX_RELATIVE_POSITIONS)

        return call, inputs.to_common_layout


class DisentangledFlash:
    """DisentangledFlash 1.1.1 at its op level: the torch.library Triton ops that its inference
    layer (disentangled_flash.kernel.InferenceDisentangledSelfAttention) calls after the QKV
    projection, fed as its forward_prepared / forward_packed feed them: the compact delta->slot LUT
    of the length family, PosK/PosQ narrowed to the family's active slots (rows padded to a
    multiple of 8), and the C2P/P2C GEMMs into head-major [H, T, slots] tables inside the timed
    call."""

    name = "df"
    package = "disentangled-flash"
    layouts = {"padded": "padded", "packed": "packed"}

    def __init__(self):
        from disentangled_flash import kernel, position, tuning
        self.kernel, self.position, self.tuning = kernel, position, tuning
        self.position_plans = position.SharedPositionPlanCache(
            position_buckets=POSITION_BUCKETS, max_relative_positions=MAX_RELATIVE_POSITIONS,
            position_embedding_size=ATT_SPAN)

    def launch_config(self, inputs):
        """The heuristic's (block_m, block_n, num_warps, num_stages) for this workload."""
        chosen = self.tuning.heuristic_config(
            phase="inference", sequence_length=self.tuning.length_family(inputs.length),
            head_dim=inputs.head_dim,
            dtype=str(inputs.dtype).removeprefix("torch."),
            batch_heads=inputs.batch * inputs.heads,
            resources=self.tuning.DeviceResources.current(inputs.qkv.device))
        return chosen.block_m, chosen.block_n, chosen.num_warps, chosen.num_stages

    def config(self, inputs):
        block_m, block_n, warps, stages = self.launch_config(inputs)
        return f"{block_m}x{block_n}/{warps}w/{stages}s"

    def prepare(self, layout, inputs):
        if inputs.length > DF_MAX_LENGTH:
            # The ops themselves do not check: a longer L would read past the family's LUT.
            raise ValueError(f"DisentangledFlash supports L <= {DF_MAX_LENGTH}")
        family = self.tuning.tuning_sequence_length(inputs.length)
        plan = self.position_plans.compact(family, inputs.qkv.device)
        first_slot, slot_count = int(plan.active_slots[0]), plan.active_slots.numel()
        key_table, query_table = (
            self.position.pad_position_table(table.narrow(1, first_slot, slot_count).contiguous())
            for table in (inputs.pos_key, inputs.pos_query))
        table_width = key_table.size(1)
        slot_lut = plan.delta_to_local.to(torch.int32).contiguous()
        position_offset = family - 1
        score_scale_log2 = inputs.scale * math.log2(math.e)
        is_bf16 = inputs.dtype == torch.bfloat16
        config = self.launch_config(inputs)
        if layout == "padded":
            q, k, v = (inputs.batch_heads_length_dim(i) for i in range(3))
            unused_mask = torch.ones(inputs.batch, inputs.length, device=q.device, dtype=torch.bool)

            def call():
                c2p = self.kernel._head_major_scores(q, key_table)
                p2c = self.kernel._head_major_scores(k, query_table)
                return self.kernel._deberta_attention_configured_op(
                    q, k, v, c2p, p2c, slot_lut, unused_mask, inputs.heads, inputs.length, family,
                    table_width, position_offset, score_scale_log2, False, True, True, is_bf16,
                    False, True, *config)

            return call, inputs.to_common_layout
        q, k, v = (inputs.tokens_heads_dim(i).permute(1, 0, 2) for i in range(3))

        def call():
            c2p = torch.matmul(q, key_table.transpose(-1, -2))
            p2c = torch.matmul(k, query_table.transpose(-1, -2))
            return self.kernel._deberta_attention_packed_configured_op(
                q, k, v, c2p, p2c, slot_lut, inputs.cu_seqlens, inputs.length, family,
                table_width, position_offset, score_scale_log2, True, True, is_bf16, False, True,
                *config)

        return call, inputs.to_common_layout


def load_peer(peer_class):
    """(peer or None, version or None, error line or None)."""
    try:
        version = importlib.metadata.version(peer_class.package)
        return peer_class(), version, None
    except Exception as error:  # noqa: BLE001 - a missing or broken peer is recorded, not fatal
        return None, None, error_line(error)


def release_memory():
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except RuntimeError:  # a sticky CUDA error: the next launch records it
        pass


def rel_l2(output, reference):
    difference = output.double() - reference
    return (difference.norm() / reference.norm()).item()


def measure_peer(peer, inputs, reference, layouts, repeats, warmups, timer):
    """One peer's row fields: a time per layout, the faster layout as <peer>_ms with its error
    against the float64 reference, or <peer>_error when no layout ran."""
    prefix = peer.name
    try:
        fields = {f"{prefix}_config": peer.config(inputs)}
    except Exception:  # noqa: BLE001 - the launch itself will report the problem
        fields = {f"{prefix}_config": None}
    best = None  # (layout name, ms, relative L2 error)
    for layout in layouts:
        layout_name = peer.layouts[layout]
        key = f"{prefix}_{layout_name}_ms"
        call = to_common_layout = None
        try:
            call, to_common_layout = peer.prepare(layout, inputs)
            fields[key], fields[key.replace("_ms", "_host_ms")] = timer.time(call, repeats,
                                                                             warmups)
            accuracy = None
            if reference is not None:
                accuracy = rel_l2(to_common_layout(call()), reference)
            if best is None or fields[key] < best[1]:
                best = (layout_name, fields[key], accuracy)
        except Exception as error:  # noqa: BLE001 - recorded in the row, the run goes on
            fields[key] = None
            fields[f"{prefix}_{layout_name}_error"] = error_line(error)
        finally:
            del call, to_common_layout  # the closures hold this layout's copies
            release_memory()
    if best is None:
        fields[f"{prefix}_ms"] = None
        layout_errors = "; ".join(value for name, value in fields.items()
                                  if name.endswith("_error"))
        fields[f"{prefix}_error"] = f"no layout ran: {layout_errors}"[:200]
        return fields
    layout_name, ms, accuracy = best
    fields.update({f"{prefix}_layout": layout_name, f"{prefix}_ms": ms,
                   f"{prefix}_rel_l2_err_vs_fp32": accuracy})
    return fields


def progress_line(row, peer_names, seconds):
    times = ", ".join(f"{name} {row[name + '_ms']:.3f} ms ({row[name + '_layout']})"
                      if row.get(name + "_ms") is not None else f"{name} failed"
                      for name in peer_names)
    return (f"[{seconds:6.1f} s] {row['shape']} L={row['L']} B={row['B']} d={row['head_dim']} "
            f"{row['dtype']}: "
            f"{times}")


def batches(args):
    """(row head, seqlens, layouts or None for --layouts) of every batch to run: the uniform
    shapes, then the mixes of --mixes_from that match --dtypes and --head_dims."""
    dtypes = args.dtypes.split(",")
    head_dims = [int(x) for x in args.head_dims.split(",")]
    for dtype_name in dtypes:
        for head_dim in head_dims:
            heads = heads_for(head_dim)
            for length in [int(x) for x in args.lengths.split(",")]:
                batch = max(1, args.tokens // length)
                yield ({"shape": "uniform", "L": length, "B": batch, "heads": heads,
                        "head_dim": head_dim, "dtype": dtype_name}, [length] * batch, None)
    if not args.mixes_from:
        return
    with open(args.mixes_from) as f:
        bench_rows = [json.loads(line) for line in f if line.strip()]
    for bench_row in bench_rows:
        if (bench_row.get("seqlens") and bench_row["dtype"] in dtypes
                and bench_row["head_dim"] in head_dims):
            head = {key: bench_row[key] for key in ("shape", "L", "B", "heads", "head_dim",
                                                      "dtype")}
            yield head, bench_row["seqlens"], ["packed"]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_shape_arguments(parser, "128,256,512,1024,2048,4096,8192")
    parser.add_argument("--warmups", type=int, default=5,
                        help="untimed calls first (the first one JIT-compiles the peer's kernel)")
    parser.add_argument("--layouts", default="padded,packed",
                        help="padded and/or packed (FD: varlen); the faster one is fd_ms / df_ms")
    parser.add_argument("--accuracy_max_length", type=int, default=2048,
                        help="float64 reference and relative L2 errors up to this L, null above")
    parser.add_argument("--mixes_from",
                        help="dflash-bench-attention JSON lines: also run its mixed batches "
                             "(rows with seqlens), packed layouts only")
    parser.add_argument("--smoke", action="store_true",
                        help="L = 512, bf16, d = 64, 5 repeats: checks that the script runs")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    if args.smoke:
        args.lengths, args.dtypes, args.head_dims, args.repeats = "512", "bf16", "64", 5
    layouts = args.layouts.split(",")
    if not layouts or any(layout not in ("padded", "packed") for layout in layouts):
        parser.error("--layouts: expected padded and/or packed")
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    peers = [(peer_class, *load_peer(peer_class)) for peer_class in (FlashDeberta,
                                                                     DisentangledFlash)]
    for peer_class, peer, version, load_error in peers:
        print(f"{peer_class.package}: {version or 'not loaded: ' + load_error}", flush=True)
    timer = ColdRunTimer()
    print(f"each timed call follows a GPU sleep and an L2 flush ({timer.prefix_ms:.3f} ms)",
          flush=True)
    started = time.monotonic()
    torch.manual_seed(0)
    with open(args.json, "w") as out, torch.inference_mode():
        for row, seqlens, batch_layouts in batches(args):
            inputs = Inputs(seqlens, row["heads"], row["head_dim"], dtypes[row["dtype"]])
            reference = inputs.reference() if inputs.length <= args.accuracy_max_length else None
            row["timing_prefix_ms"] = timer.prefix_ms
            for peer_class, peer, version, load_error in peers:
                row[f"{peer_class.name}_version"] = version
                if peer is None:
                    row[f"{peer_class.name}_ms"] = None
                    row[f"{peer_class.name}_error"] = load_error
                    continue
                row.update(measure_peer(peer, inputs, reference, batch_layouts or layouts,
                                        args.repeats, args.warmups, timer))
            print(progress_line(row, [peer_class.name for peer_class, *_ in peers],
                                time.monotonic() - started), flush=True)
            out.write(json.dumps(row) + "\n")
            out.flush()
            del inputs, reference
            release_memory()


if __name__ == "__main__":
    main()
