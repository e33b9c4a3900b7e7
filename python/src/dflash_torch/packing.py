"""Packing a padded batch into concatenated sequences (cu_seqlens) and back.

A padded batch [B, L, ...] with a mask [B, L] becomes [T, ...] holding only the tokens whose mask is
set, in order, plus cu_seqlens (int32 [B + 1]) and the longest length. Every sequence's tokens
must be contiguous in its row (right or left padding): relative positions inside a packed sequence
are then the same as in the padded row. Building the layout reads the mask on the host once (the
token count and the longest length are shapes); everything after it stays on the device. Built
from the host copy of a mask (a CPU tensor), it reads no device at all: PackedLayout.to() then
moves its two index tensors to the device without a synchronisation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PackedLayout:
    """Where the tokens of a padded [B, L] batch went: packed row t is flat position index[t]."""

    index: torch.Tensor  # int64 [T]
    cu_seqlens: torch.Tensor  # int32 [B + 1]
    max_seqlen: int
    batch: int
    length: int

    @property
    def total_tokens(self) -> int:
        return self.index.numel()

    def to(self, device: torch.device | str) -> PackedLayout:
        """This layout with its tensors on `device`: stream-ordered copies from pinned memory, so
        the host does not wait for the device."""
        device = torch.device(device)
        if self.index.device == device:
            return self

        def move(tensor: torch.Tensor) -> torch.Tensor:
            if tensor.device.type == "cpu" and device.type == "cuda":
                tensor = tensor.pin_memory()
            return tensor.to(device, non_blocking=True)

        return dataclasses.replace(self, index=move(self.index), cu_seqlens=move(self.cu_seqlens))


def packed_layout(mask: torch.Tensor) -> PackedLayout:
    """The layout of `mask` ([B, L], nonzero = token). Raises ValueError when a row's tokens are not
    contiguous (they would change relative positions)."""
    if mask.dim() != 2:
        raise ValueError(f"mask must be [B, L], got {tuple(mask.shape)}")
    present = mask != 0
    batch, length = present.shape
    lengths = present.sum(dim=1)
    positions = torch.arange(length, device=mask.device).expand(batch, length)
    first = torch.where(present, positions, length).amin(dim=1)
    last = torch.where(present, positions, -1).amax(dim=1)
    span = torch.where(lengths > 0, last - first + 1, 0)
    # One read of the device: the token count, the longest sequence and a gap check.
    total, longest, gaps = torch.stack(
        [lengths.sum(), lengths.max() if batch else lengths.sum(),
         (span != lengths).sum()]).tolist()
    if gaps:
        raise ValueError("a sequence's tokens are not contiguous in its row; packing would change "
                         "relative positions")
    index = torch.nonzero_static(present.flatten(), size=total).flatten()
    cu_seqlens = torch.zeros(batch + 1, dtype=torch.int32, device=mask.device)
    cu_seqlens[1:] = torch.cumsum(lengths, dim=0)
    return PackedLayout(index=index, cu_seqlens=cu_seqlens, max_seqlen=int(longest), batch=batch,
                        length=length)


def fixed_shape_layout(mask: torch.Tensor, tokens: int, longest: int,
                       extra_sequences: int) -> PackedLayout:
    """The layout of `mask` ([B, L]) computed on its device at shapes fixed beforehand, with no
    host read, so that a CUDA graph can record it. It has `tokens` rows, at least the mask's
    token count T; rows T .. tokens - 1 form `extra_sequences` sequences of at most `longest`
    tokens each (then empty), so cu_seqlens ([B + 1 + extra_sequences]) ends at `tokens`, as the
    kernel requires of a packed batch. Extra rows gather from and scatter to flat position
    B * L - 1, which must be padding. `longest` must bound every row's token count and
    tokens - T must not exceed extra_sequences * longest (neither is checked, which would read
    the device: longer rows are cut, and so are tokens past `tokens`); rows' tokens must be
    contiguous, as packed_layout checks."""
    batch, length = mask.shape
    device = mask.device
    present = mask != 0
    positions = torch.arange(length, device=device)
    first = torch.where(present, positions, length).amin(dim=1)
    bounds = torch.zeros(batch + 1 + extra_sequences, dtype=torch.int64, device=device)
    # Clamped: a mask with longer rows or more tokens than the caller's bounds (a layout handed
    # in that is not the mask's) must not make the kernel read or write past them.
    bounds[1:batch + 1] = present.sum(dim=1).clamp_(max=longest).cumsum(dim=0).clamp_(max=tokens)
    count = bounds[batch]
    if extra_sequences:
        steps = torch.arange(1, extra_sequences + 1, device=device) * longest
        bounds[batch + 1:] = torch.clamp(count + steps, max=tokens)
    token = torch.arange(tokens, device=device)
    sequence = torch.searchsorted(bounds[1:batch + 1], token, right=True).clamp_(max=batch - 1)
    real = sequence * length + first[sequence] + (token - bounds[sequence])
    index = torch.where(token < count, real, batch * length - 1)
    return PackedLayout(index=index, cu_seqlens=bounds.to(torch.int32), max_seqlen=longest,
                        batch=batch, length=length)


def pack(padded: torch.Tensor, layout: PackedLayout) -> torch.Tensor:
    """[B, L, ...] -> [T, ...]."""
    return padded.reshape(layout.batch * layout.length, *padded.shape[2:]).index_select(
        0, layout.index)


def unpack(packed: torch.Tensor, layout: PackedLayout, fill: float = 0.0) -> torch.Tensor:
    """[T, ...] -> [B, L, ...], `fill` where the mask is unset."""
    flat = packed.new_full((layout.batch * layout.length, *packed.shape[1:]), fill)
    flat.index_copy_(0, layout.index, packed)
    return flat.view(layout.batch, layout.length, *packed.shape[1:])


def unpack_all(packed: list[torch.Tensor] | torch.Tensor, layout: PackedLayout,
               fill: float = 0.0) -> tuple[torch.Tensor, ...]:
    """unpack() of each [T, ...] tensor of `packed` (same shapes; or one [N, T, ...] tensor), by
    one copy for all of them: contiguous [B, L, ...] views of one buffer."""
    stacked = packed if isinstance(packed, torch.Tensor) else torch.stack(packed)
    flat = stacked.new_full((len(packed), layout.batch * layout.length, *stacked.shape[2:]), fill)
    flat.index_copy_(1, layout.index, stacked)
    return flat.view(len(packed), layout.batch, layout.length, *stacked.shape[2:]).unbind(0)


def unpack_layers(states: list[torch.Tensor] | torch.Tensor,
                  layout: PackedLayout) -> list[torch.Tensor]:
    """The layers' packed states ([T, ...] each, or stacked) as new padded tensors: the last by
    unpack() into a tensor of its own, so that keeping it alone (DebertaV2Model's
    last_hidden_state) does not keep every layer's alive; the others by unpack_all(), views of one
    buffer."""
    last = unpack(states[-1], layout)
    if len(states) == 1:
        return [last]
    return [*unpack_all(states[:-1], layout), last]


def pack_batch(mask: torch.Tensor, *tensors: torch.Tensor):
    """The layout of `mask` and each [B, L, ...] tensor packed: (layout, packed...)."""
    layout = packed_layout(mask)
    return (layout, *(pack(t, layout) for t in tensors))
