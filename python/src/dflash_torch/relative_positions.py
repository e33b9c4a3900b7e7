"""The relative-position slot table of a DeBERTa-v2/v3 model (docs/deberta.md#relative-positions).

For query i and key j of one sequence, delta = i - j, and both position terms read slot
idx(delta) = clamp(bucket(delta) + span, 0, 2 * span - 1) of the per-layer PosK / PosQ
projections. With log buckets, bucket(delta) follows transformers' make_log_bucket_position in
float32; the kernel needs idx only over [-band, band], beyond which it no longer changes. This is
the Python twin of engine/model/relative_position.h (same band rule), evaluated with torch so that
float32 rounding is torch's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SlotTable:
    """idx(delta) for delta in [-band, band] at [delta + band]; slots 0 .. 2 * span - 1."""

    table: tuple[int, ...]
    band: int
    span: int
    settled: bool  # False: some |delta| > band maps elsewhere (the kernel refuses such tables).

    def lookup(self, delta: int) -> int:
        return self.table[max(-self.band, min(self.band, delta)) + self.band]


@dataclass(frozen=True)
class PositionSettings:
    span: int  # transformers' pos_ebd_size (the attention span k)
    position_buckets: int  # <= 0: no log buckets
    max_relative_positions: int  # after its fallback to max_position_embeddings

    @classmethod
    def from_config(cls, config) -> "PositionSettings":
        max_relative = getattr(config, "max_relative_positions", -1)
        if max_relative is None or max_relative < 1:
            max_relative = config.max_position_embeddings
        buckets = getattr(config, "position_buckets", -1)
        if buckets is None:
            buckets = -1
        span = buckets if buckets > 0 else max_relative
        return cls(span=span, position_buckets=buckets, max_relative_positions=max_relative)

    @property
    def log_buckets(self) -> bool:
        return self.position_buckets > 0 and self.max_relative_positions > 0


def _bucket(delta: torch.Tensor, settings: PositionSettings) -> torch.Tensor:
    if not settings.log_buckets:
        return delta
    mid = settings.position_buckets // 2
    sign = torch.sign(delta)
    magnitude = torch.where((delta < mid) & (delta > -mid), torch.full_like(delta, mid - 1),
                            delta.abs())
    # int64 / int -> float32, log, divide, multiply, ceil: every step in float32 as torch does.
    denominator = torch.log(torch.tensor((settings.max_relative_positions - 1) / mid))
    log_position = torch.ceil(torch.log(magnitude / mid) / denominator * (mid - 1)) + mid
    return torch.where(magnitude <= mid, delta.to(log_position.dtype),
                       log_position * sign).to(torch.int64)


def slot_indices(deltas: torch.Tensor, settings: PositionSettings) -> torch.Tensor:
    """idx(delta) for an int64 tensor of deltas."""
    return torch.clamp(_bucket(deltas, settings) + settings.span, 0, 2 * settings.span - 1)


def build_slot_table(settings: PositionSettings) -> SlotTable:
    top = 2 * settings.span - 1
    # Validated real configs settle by max(span, max_position) + 1; the cap bounds the search.
    cap = 4 * max(settings.span, settings.max_relative_positions) + 4
    deltas = torch.arange(-cap, cap + 1, dtype=torch.int64)
    index = slot_indices(deltas, settings)
    positive = index[cap:]  # idx(0), idx(1), ...
    negative = index[:cap + 1].flip(0)  # idx(0), idx(-1), ...
    done = (positive == top) & (negative == 0)
    if settings.log_buckets and settings.position_buckets // 2 == 1:
        # mid - 1 == 0: the log branch is constant for every |delta| > mid.
        done[settings.position_buckets // 2 + 1:] = True
    hits = torch.nonzero(done).flatten()
    settled = hits.numel() > 0
    band = int(hits[0]) if settled else cap
    table = index[cap - band:cap + band + 1]
    return SlotTable(table=tuple(int(x) for x in table), band=band, span=settings.span,
                     settled=settled)


def attention_scale(head_dim: int, position_terms: int) -> float:
    """1 / sqrt(d * (1 + #position types)): transformers counts pos_att_type, not the terms run."""
    return 1.0 / math.sqrt(head_dim * (1 + position_terms))
