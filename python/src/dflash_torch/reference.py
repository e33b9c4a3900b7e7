"""The ops' math in plain torch, with the score matrix materialised: the reference the tests
compare the kernel with, and a CPU implementation tests register to run the DeBERTa integration
end to end without a GPU (use_reference_on_cpu). Float64 inside; slow; small inputs only.
"""

from __future__ import annotations

import torch

from . import ops
from .ops import registered_slot_table


def _sequence(q, k, v, pos_key, pos_query, idx, num_heads, scale, key_mask=None):
    """One sequence: q, k, v [L, H*d]; idx [L, L] slot of (i, j). Returns out [L, H*d], lse [H, L]."""
    length = q.size(0)
    heads = lambda x: x.double().view(x.size(0), num_heads, -1).transpose(0, 1)  # [H, n, d]
    qh, kh, vh = heads(q), heads(k), heads(v)
    scores = qh @ kh.transpose(1, 2)
    if pos_key is not None:
        c2p = qh @ heads(pos_key).transpose(1, 2)  # [H, L, 2k]
        scores = scores + torch.gather(c2p, 2, idx.expand(num_heads, length, length))
    if pos_query is not None:
        p2c = kh @ heads(pos_query).transpose(1, 2)  # [H, L(j), 2k]
        # Entry (i, j) reads P2C[j, idx(i - j)].
        scores = scores + torch.gather(p2c, 2, idx.t().expand(num_heads, length, length)).transpose(
            1, 2)
    scores = scores * scale
    if key_mask is not None:
        scores = scores.masked_fill(~key_mask.bool().view(1, 1, length), float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse.unsqueeze(-1)).nan_to_num(0.0)
    out = (probs @ vh).transpose(0, 1).reshape(length, -1)
    return out, lse


def _slots(slot_table_id: int, length: int, device) -> torch.Tensor:
    table = registered_slot_table(slot_table_id)
    positions = torch.arange(length)
    delta = (positions[:, None] - positions[None, :]).clamp(-table.band, table.band) + table.band
    return torch.tensor(table.table, dtype=torch.int64)[delta].to(device)


def attention_padded_reference(q, k, v, pos_key, pos_query, slot_table, positions_id, key_mask,
                               num_heads, scale, return_lse):
    batch, length, _ = q.shape
    has_positions = pos_key is not None or pos_query is not None
    idx = _slots(positions_id, length, q.device) if has_positions else None
    outs, lses = [], []
    for b in range(batch):
        out, lse = _sequence(q[b], k[b], v[b], pos_key, pos_query, idx, num_heads, scale,
                             key_mask[b])
        outs.append(out)
        lses.append(lse)
    out = torch.stack(outs).to(q.dtype)
    lse = torch.stack(lses, dim=1).float() if return_lse else q.new_empty((0,), dtype=torch.float32)
    return out, lse


def attention_packed_reference(q, k, v, pos_key, pos_query, slot_table, positions_id, cu_seqlens,
                               max_seqlen, num_heads, scale, return_lse):
    bounds = cu_seqlens.tolist()
    has_positions = pos_key is not None or pos_query is not None
    out = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    lse = torch.full((num_heads, q.size(0)), float("-inf"), dtype=torch.float64, device=q.device)
    for start, end in zip(bounds[:-1], bounds[1:]):
        if end == start:
            continue
        idx = _slots(positions_id, end - start, q.device) if has_positions else None
        out[start:end], lse[:, start:end] = _sequence(q[start:end], k[start:end], v[start:end],
                                                      pos_key, pos_query, idx, num_heads, scale)
    return out.to(q.dtype), (lse.float() if return_lse else q.new_empty((0,), dtype=torch.float32))


def use_reference_on_cpu() -> None:
    """Registers the references as the ops' CPU kernels (tests only: the DeBERTa integration then
    runs its kernel path on CPU tensors when told CPU is a kernel device)."""
    ops.attention_padded.register_kernel("cpu")(attention_padded_reference)
    ops.attention_packed.register_kernel("cpu")(attention_packed_reference)
