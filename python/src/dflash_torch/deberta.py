"""optimize_deberta: the fused attention inside transformers' DeBERTa-v2/v3 models.

Only the attention computation changes. The encoder (DebertaV2Encoder) and every
DisentangledSelfAttention get a subclass of their own class (their __class__ is swapped), so
parameters, buffers, names and checkpoints stay exactly as they were, shared by reference; the
projections, SelfOutput, FFN, LayerNorms, ConvLayer and heads are transformers' own modules.

Per forward, the encoder decides whether the kernel can run: tensors on a CUDA device (or meta,
for tracing), float16 / bfloat16 / float32, head dim 32 / 64 / 128, no gradients needed (no_grad or
inference_mode, or nothing requires grad), no attention dropout (eval mode), no
output_attentions, a 2-D attention mask and no z_steps query states. Otherwise the stock forward
runs and a warning says why, once per reason and process.

Layouts: "padded" passes the key mask [B, L] to the kernel (no [B, 1, L, L] mask is built);
"packed" packs the batch once at the encoder's entry (cu_seqlens; one read of the mask on the
host), runs every layer on the packed tokens and unpacks the outputs. Padding positions of the
outputs differ from the stock model's (which attends them uniformly): the kernel computes padding
query rows over the real keys (padded) or leaves them zero (packed); real positions match.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from transformers.modeling_outputs import BaseModelOutput
from transformers.models.deberta_v2.modeling_deberta_v2 import (DebertaV2Encoder,
                                                                DisentangledSelfAttention)

from . import _native, ops
from .packing import PackedLayout, pack, packed_layout, unpack
from .relative_positions import PositionSettings, attention_scale, build_slot_table

LAYOUTS = ("padded", "packed")
FALLBACK_MODES = ("warn", "error", "silent")
_KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_KERNEL_DEVICES = ("cuda", "meta")

_warned: set[str] = set()


class FallbackError(RuntimeError):
    """optimize_deberta(..., fallback="error") and the kernel cannot run a forward."""


def reset_fallback_warnings() -> None:
    """Warn again for reasons already warned about (tests)."""
    _warned.clear()


def _fall_back(reason: str, mode: str) -> None:
    if mode == "error":
        raise FallbackError(f"dflash_torch: the fused attention cannot run: {reason}")
    if mode == "warn" and reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"dflash_torch: stock DeBERTa attention runs instead of the fused kernel: "
                      f"{reason} (warned once)", RuntimeWarning, stacklevel=4)


@dataclass(frozen=True)
class _PaddedKeys:
    """What the encoder hands its layers instead of the [B, 1, L, L] mask (padded layout)."""

    key_mask: torch.Tensor  # bool [B, L]
    slot_table: torch.Tensor | None
    positions_id: int


@dataclass(frozen=True)
class _PackedSequences:
    """The packed layout's counterpart: tokens [T, ...] of sequences cu_seqlens."""

    cu_seqlens: torch.Tensor
    max_seqlen: int
    slot_table: torch.Tensor | None
    positions_id: int


class DflashDisentangledSelfAttention(DisentangledSelfAttention):
    """DisentangledSelfAttention whose score / softmax / context part is the fused kernel when the
    encoder passes a kernel layout; any other call runs the stock forward."""

    def forward(self, hidden_states, attention_mask, output_attentions=False, query_states=None,
                relative_pos=None, rel_embeddings=None):
        if not isinstance(attention_mask, (_PaddedKeys, _PackedSequences)):
            return super().forward(hidden_states, attention_mask, output_attentions,
                                   query_states=query_states, relative_pos=relative_pos,
                                   rel_embeddings=rel_embeddings)
        return self._dflash_attention(hidden_states, attention_mask, rel_embeddings), None

    def _dflash_attention(self, hidden_states, layout, rel_embeddings):
        query = self.query_proj(hidden_states)
        key = self.key_proj(hidden_states)
        value = self.value_proj(hidden_states)
        pos_key = pos_query = None
        if self.relative_attention and rel_embeddings is not None:
            relative = rel_embeddings[:2 * self.pos_ebd_size]  # pos_dropout: eval mode only
            c2p, p2c = "c2p" in self.pos_att_type, "p2c" in self.pos_att_type
            if self.share_att_key:
                pos_key = self.key_proj(relative) if c2p else None
                pos_query = self.query_proj(relative) if p2c else None
            else:
                pos_key = self.pos_key_proj(relative) if c2p else None
                pos_query = self.pos_query_proj(relative) if p2c else None
        terms = ("c2p" in self.pos_att_type) + ("p2c" in self.pos_att_type)
        scale = attention_scale(self.attention_head_size, terms)
        if isinstance(layout, _PaddedKeys):
            context, _ = torch.ops.dflash.attention_padded(
                query, key, value, pos_key, pos_query, layout.slot_table, layout.positions_id,
                layout.key_mask, self.num_attention_heads, scale, False)
        else:
            context, _ = torch.ops.dflash.attention_packed(
                query, key, value, pos_key, pos_query, layout.slot_table, layout.positions_id,
                layout.cu_seqlens, layout.max_seqlen, self.num_attention_heads, scale, False)
        return context


class DflashDebertaV2Encoder(DebertaV2Encoder):
    """DebertaV2Encoder that runs its layers with the fused attention where it can."""

    def forward(self, hidden_states, attention_mask, output_hidden_states=True,
                output_attentions=False, query_states=None, relative_pos=None, return_dict=True):
        reason = self._dflash_fallback_reason(hidden_states, attention_mask, output_attentions,
                                              query_states)
        if reason is not None:
            _fall_back(reason, self._dflash_fallback)
            return super().forward(hidden_states, attention_mask,
                                   output_hidden_states=output_hidden_states,
                                   output_attentions=output_attentions,
                                   query_states=query_states, relative_pos=relative_pos,
                                   return_dict=return_dict)
        slot_table = self.dflash_slot_table if self._dflash_positions_id >= 0 else None
        packing: PackedLayout | None = None
        if self._dflash_layout == "packed":
            packing = packed_layout(attention_mask)
            states = pack(hidden_states, packing)
            layout = _PackedSequences(packing.cu_seqlens, packing.max_seqlen, slot_table,
                                      self._dflash_positions_id)
        else:
            states = hidden_states
            layout = _PaddedKeys((attention_mask != 0).contiguous(), slot_table,
                                 self._dflash_positions_id)
        rel_embeddings = self.get_rel_embedding()
        all_hidden_states = (hidden_states,) if output_hidden_states else None
        for index, layer_module in enumerate(self.layer):
            states, _ = layer_module(states, layout, query_states=None, relative_pos=None,
                                     rel_embeddings=rel_embeddings, output_attentions=False)
            if index == 0 and self.conv is not None:
                # The ConvLayer mixes neighbouring positions: it runs on the padded layout.
                padded = unpack(states, packing) if packing is not None else states
                padded = self.conv(hidden_states, padded, attention_mask)
                states = pack(padded, packing) if packing is not None else padded
            if output_hidden_states:
                all_hidden_states = all_hidden_states + (
                    unpack(states, packing) if packing is not None else states,)
        if output_hidden_states:
            padded_states = all_hidden_states[-1]
        else:
            padded_states = unpack(states, packing) if packing is not None else states
        if not return_dict:
            return tuple(v for v in [padded_states, all_hidden_states] if v is not None)
        return BaseModelOutput(last_hidden_state=padded_states, hidden_states=all_hidden_states,
                               attentions=None)

    def _dflash_fallback_reason(self, hidden_states, attention_mask, output_attentions,
                                query_states) -> str | None:
        if self._dflash_static_reason is not None:
            return self._dflash_static_reason
        if output_attentions:
            return "output_attentions=True needs the attention probabilities"
        if query_states is not None:
            return "query_states (z_steps > 1) are not supported"
        if attention_mask.dim() != 2:
            return "only a 2-D [batch, length] attention mask is supported"
        if hidden_states.device.type not in _KERNEL_DEVICES:
            return f"tensors on {hidden_states.device.type} (the kernel runs on CUDA devices)"
        if hidden_states.device.type == "cuda" and self._dflash_library_error is not None:
            return self._dflash_library_error
        if hidden_states.dtype not in _KERNEL_DTYPES:
            return f"dtype {hidden_states.dtype} (supported: float16, bfloat16, float32)"
        if torch.is_grad_enabled() and (hidden_states.requires_grad
                                        or self._dflash_weights_require_grad()):
            return ("gradients are required and the kernel is forward-only; run under "
                    "torch.no_grad() or torch.inference_mode()")
        if self.training and self._dflash_attention_dropout():
            return "training mode with attention dropout"
        return None

    def _dflash_weights_require_grad(self) -> bool:
        attention = self.layer[0].attention.self
        return attention.query_proj.weight.requires_grad or attention.key_proj.weight.requires_grad

    def _dflash_attention_dropout(self) -> bool:
        attention = self.layer[0].attention.self
        return attention.dropout.p > 0 or getattr(attention, "pos_dropout", attention.dropout).p > 0


def _static_reason(attention: DisentangledSelfAttention, settings: PositionSettings | None,
                   settled: bool) -> str | None:
    if attention.attention_head_size not in ops.SUPPORTED_HEAD_DIMS:
        return (f"head dim {attention.attention_head_size} (supported: "
                f"{', '.join(map(str, ops.SUPPORTED_HEAD_DIMS))})")
    unknown = set(attention.pos_att_type) - {"c2p", "p2c"}
    if unknown:
        return f"position attention types {sorted(unknown)} (supported: c2p, p2c)"
    if settings is not None and not settled:
        return "a relative-position table that does not settle (exotic bucket settings)"
    return None


def optimize_deberta(model: torch.nn.Module, *, layout: str = "padded",
                     fallback: str = "warn") -> torch.nn.Module:
    """Swaps the attention of every DeBERTa-v2/v3 encoder in `model` for the fused kernel, in place.

    `model`: a transformers DebertaV2Model or any model holding one (sequence / token
    classification, question answering, ...). `layout`: "padded" or "packed" (see the module
    docstring). `fallback`: "warn" (stock forward with a one-time warning where the kernel cannot
    run), "error" (raise FallbackError instead) or "silent". Returns `model`.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if fallback not in FALLBACK_MODES:
        raise ValueError(f"fallback must be one of {FALLBACK_MODES}, got {fallback!r}")
    encoders = [m for m in model.modules() if isinstance(m, DebertaV2Encoder)]
    if not encoders:
        raise TypeError(f"{type(model).__name__} holds no DeBERTa-v2/v3 encoder (DebertaV2Encoder)")
    library_error = _native.load_error()
    for encoder in encoders:
        attention = encoder.layer[0].attention.self
        settings = None
        settled = True
        positions_id = -1
        if attention.relative_attention:
            settings = PositionSettings(span=attention.pos_ebd_size,
                                        position_buckets=attention.position_buckets,
                                        max_relative_positions=attention.max_relative_positions)
            table = build_slot_table(settings)
            settled = table.settled
            positions_id = ops.register_slot_table(table)
            device = encoder.rel_embeddings.weight.device
            if "dflash_slot_table" in encoder._buffers:
                del encoder._buffers["dflash_slot_table"]
            # Not persistent: checkpoints keep their keys; .to() moves it with the model.
            encoder.register_buffer("dflash_slot_table",
                                    torch.tensor(table.table, dtype=torch.int32, device=device),
                                    persistent=False)
        encoder.__class__ = DflashDebertaV2Encoder
        encoder._dflash_layout = layout
        encoder._dflash_fallback = fallback
        encoder._dflash_positions_id = positions_id
        encoder._dflash_static_reason = _static_reason(attention, settings, settled)
        encoder._dflash_library_error = (
            None if library_error is None else f"the attention library is unavailable: "
            f"{library_error}")
        for layer in encoder.layer:
            layer.attention.self.__class__ = DflashDisentangledSelfAttention
    return model


def restore_deberta(model: torch.nn.Module) -> torch.nn.Module:
    """Undoes optimize_deberta in place."""
    for module in model.modules():
        if isinstance(module, DflashDebertaV2Encoder):
            module.__class__ = DebertaV2Encoder
            module._buffers.pop("dflash_slot_table", None)
            for name in ("_dflash_layout", "_dflash_fallback", "_dflash_positions_id",
                         "_dflash_static_reason", "_dflash_library_error"):
                module.__dict__.pop(name, None)
        elif isinstance(module, DflashDisentangledSelfAttention):
            module.__class__ = DisentangledSelfAttention
    return model
