"""The fused attention forward through libdflash_attention's C interface alone, for timing
against the torch op: the arguments are built once, so a call is the launch and nothing else."""
import ctypes

import torch

from dflash_torch import _native


def capi_forward(library, q, k, v, pos_key, pos_query, table, slot_table, heads, head_dim, scale,
                 *, key_mask=None, cu_seqlens=None, max_seqlen=0):
    """A callable that runs one forward of bf16 q / k / v ([B, L, H*d] with `key_mask`, or
    [T, H*d] with `cu_seqlens`; views of one fused [..., 3 H*d] projection) on the current
    stream. `table` is the slot table's host copy, `slot_table` its device copy. The callable's
    `args` attribute holds the built arguments."""
    width = heads * head_dim
    args = _native.Args()
    args.struct_size = ctypes.sizeof(_native.Args)
    args.device = q.device.index if q.device.index is not None else torch.cuda.current_device()
    args.dtype, args.num_heads, args.head_dim = _native.BFLOAT16, heads, head_dim
    args.q, args.k, args.v = q.data_ptr(), k.data_ptr(), v.data_ptr()
    args.q_row_stride = args.k_row_stride = args.v_row_stride = 3 * width
    out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
    args.out, args.out_row_stride = out.data_ptr(), width
    args.pos_key, args.pos_query = pos_key.data_ptr(), pos_query.data_ptr()
    if key_mask is not None:
        args.key_padding_mask = key_mask.data_ptr()
        args.num_sequences, args.padded_length = q.size(0), q.size(1)
    else:
        args.cu_seqlens, args.num_sequences = cu_seqlens.data_ptr(), cu_seqlens.numel() - 1
        args.max_seqlen, args.total_tokens = max_seqlen, q.size(0)
    args.scale = scale
    args.positions_id = library.register_positions(table.table, table.band, table.span)
    args.slot_table = slot_table.data_ptr()
    workspace_bytes = library.workspace_bytes(args)
    workspace = torch.empty(max(workspace_bytes, 1), dtype=torch.uint8, device=q.device)
    stream = torch.cuda.current_stream(q.device).cuda_stream

    def run():
        # `out` and `workspace` live as long as this closure: the arguments point into them.
        library.forward(args, workspace.data_ptr(), workspace_bytes, stream)
        return out
    run.args = args
    return run
