"""optimize_deberta: the fused attention inside transformers' DeBERTa-v2/v3 models.

Only the attention computation changes. The encoder (DebertaV2Encoder) gets a subclass of its
own class (its __class__ is swapped), so parameters, names and checkpoints stay exactly as they
were, shared by reference; the projections, SelfOutput, FFN, LayerNorms, ConvLayer and heads are
transformers' own modules, called by encoder_forward in DebertaV2Layer's order (layer-level hooks
do not fire on the kernel path). The Hub layer (layers.DebertaV2Encoder) runs the same
encoder_forward on a stock encoder, preparing it at its first forward.

Per forward, the encoder decides whether the kernel can run: tensors on a CUDA device (or meta,
for tracing), float16 / bfloat16 / float32, head dim 32 / 64 / 128, no gradients needed (no_grad or
inference_mode, or nothing requires grad), no attention dropout (eval mode), no
output_attentions, a 2-D attention mask and no z_steps query states. Otherwise the stock forward
runs and a warning says why, once per reason and process.

Layouts: "padded" passes the key mask [B, L] to the kernel (no [B, 1, L, L] mask is built);
"packed" packs the batch once at the encoder's entry (cu_seqlens; one read of the mask on the
host, which waits for the device, unless use_packed_layout hands the encoder a layout built from
the host copy of the mask), runs every layer on the packed tokens and unpacks the outputs.
Padding positions of the outputs differ from the stock model's (which attends them uniformly):
the kernel computes padding query rows over the real keys (padded) or leaves them zero (packed);
real positions match.

Per layer, Q, K and V come from one GEMM and the projected position tables are reused across
forwards while their parameters are unchanged (projections.py).

With cuda_graphs=True, each encoder records its kernel path as a CUDA graph per batch shape (and
for the packed layout per rounded token count) and replays it (encoder_graphs.py); the eager path
runs wherever a graph cannot.
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
from transformers.modeling_outputs import BaseModelOutput
from transformers.models.deberta_v2.modeling_deberta_v2 import (DebertaV2Encoder,
                                                                DisentangledSelfAttention)

from . import _native, ops, projections
from .encoder_graphs import EncoderGraphs
from .layer_tail import layer_tail
from .packing import PackedLayout, pack, packed_layout, unpack, unpack_layers
from .relative_positions import PositionSettings, attention_scale, build_slot_table

LAYOUTS = ("padded", "packed")
FALLBACK_MODES = ("warn", "error", "silent")
_KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_KERNEL_DEVICES = ("cuda", "meta")

_warned: set[str] = set()


_given_layout: contextvars.ContextVar[PackedLayout | None] = contextvars.ContextVar(
    "dflash_packed_layout", default=None)


@contextlib.contextmanager
def use_packed_layout(layout: PackedLayout):
    """Packed encoders that run inside the block take `layout` instead of building it from the
    attention mask on the device, which reads the mask on the host and so waits for all the work
    queued before it. `layout` is packed_layout() of the same mask's host copy (a CPU tensor: no
    device read; it is moved to the device, without waiting, where it is not there yet); it must
    match the mask, which is not checked beyond its shape (that would read the device)."""
    token = _given_layout.set(layout)
    try:
        yield layout
    finally:
        _given_layout.reset(token)


def _encoder_packing(attention_mask: torch.Tensor, device: torch.device) -> PackedLayout:
    given = _given_layout.get()
    if given is None:
        return packed_layout(attention_mask)
    if (given.batch, given.length) != tuple(attention_mask.shape):
        raise ValueError(f"use_packed_layout: the layout is for [{given.batch}, {given.length}], "
                         f"the attention mask is {list(attention_mask.shape)}")
    return given.to(device)


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
    reuse: ops.LaunchCache  # the layers' one launch (they differ only in their tensors)


@dataclass(frozen=True)
class _PackedSequences:
    """The packed layout's counterpart: tokens [T, ...] of sequences cu_seqlens."""

    cu_seqlens: torch.Tensor
    max_seqlen: int
    slot_table: torch.Tensor | None
    positions_id: int
    reuse: ops.LaunchCache


def attention_context(attention: DisentangledSelfAttention, hidden_states: torch.Tensor,
                      layout, rel_embeddings: Callable[[], torch.Tensor] | None,
                      encoder: DebertaV2Encoder, positions=None) -> torch.Tensor:
    """What DisentangledSelfAttention returns as its context, by the fused kernel.
    `rel_embeddings()` returns the encoder's relative embeddings (None: no position terms);
    `positions`: the layer's (pos_key, pos_query) where the caller projected them already."""
    query, key, value = projections.query_key_value(attention, hidden_states)
    c2p, p2c = "c2p" in attention.pos_att_type, "p2c" in attention.pos_att_type
    pos_key = pos_query = None
    if attention.relative_attention and rel_embeddings is not None:
        pos_key, pos_query = (positions if positions is not None else
                              projections.position_tables(encoder, attention, rel_embeddings))
    scale = attention_scale(attention.attention_head_size, int(c2p) + int(p2c))
    if isinstance(layout, _PaddedKeys):
        context, _ = ops.run_padded(query, key, value, pos_key, pos_query, layout.slot_table,
                                    layout.positions_id, layout.key_mask,
                                    attention.num_attention_heads, scale, False,
                                    reuse=layout.reuse)
    else:
        context, _ = ops.run_packed(query, key, value, pos_key, pos_query, layout.slot_table,
                                    layout.positions_id, layout.cu_seqlens, layout.max_seqlen,
                                    attention.num_attention_heads, scale, False,
                                    reuse=layout.reuse)
    return context


class _RelativeEmbeddings:
    """The encoder's get_rel_embedding(), computed at most once per forward and only when a layer
    projects it (cached position tables need none)."""

    def __init__(self, encoder: DebertaV2Encoder):
        self._encoder = encoder
        self._value = None

    def __call__(self) -> torch.Tensor:
        if self._value is None:
            self._value = self._encoder.get_rel_embedding()
        return self._value


def _self_attention(layer) -> DisentangledSelfAttention:
    return layer._modules["attention"]._modules["self"]


def _layer_forward(layer, hidden_states, layout, rel_embeddings, encoder, positions=None):
    """DebertaV2Layer's composition with the fused attention context."""
    context = attention_context(_self_attention(layer), hidden_states, layout, rel_embeddings,
                                encoder, positions)
    return layer_tail(layer, context, hidden_states)


def encoder_forward(encoder: DebertaV2Encoder, hidden_states, attention_mask,
                    output_hidden_states=True, output_attentions=False, query_states=None,
                    relative_pos=None, return_dict=True):
    """DebertaV2Encoder.forward with the fused attention, or the stock forward where the kernel
    cannot run (warned once per reason). Prepares a stock encoder at its first call."""
    if "_dflash_layout" not in encoder.__dict__:
        prepare_encoder(encoder, layout="padded", fallback="warn")
    reason = _fallback_reason(encoder, hidden_states, attention_mask, output_attentions,
                              query_states)
    if reason is not None:
        _fall_back(reason, encoder._dflash_fallback)
        return DebertaV2Encoder.forward(encoder, hidden_states, attention_mask,
                                        output_hidden_states=output_hidden_states,
                                        output_attentions=output_attentions,
                                        query_states=query_states, relative_pos=relative_pos,
                                        return_dict=return_dict)
    graphs = encoder._dflash_graphs
    states = packing = None
    if graphs is not None and graphs.applies(hidden_states, attention_mask):
        if encoder._dflash_layout == "packed":
            packing = _encoder_packing(attention_mask, hidden_states.device)
        states = graphs.forward(encoder, hidden_states, attention_mask, output_hidden_states,
                                packing)
    if states is None:
        states = _encode(encoder, hidden_states, attention_mask, output_hidden_states, packing)
    all_hidden_states = (hidden_states,) + tuple(states) if output_hidden_states else None
    last = states[-1] if states else hidden_states  # an encoder of no layers
    if not return_dict:
        return tuple(v for v in [last, all_hidden_states] if v is not None)
    return BaseModelOutput(last_hidden_state=last, hidden_states=all_hidden_states,
                           attentions=None)


def _encode(encoder: DebertaV2Encoder, hidden_states: torch.Tensor,
            attention_mask: torch.Tensor, keep_all: bool,
            packing: PackedLayout | None = None) -> list[torch.Tensor]:
    """The kernel path in the encoder's layout: the layers' output states, padded [B, L, H] each:
    every layer's (`keep_all`) or the last one's. `packing`: the packed layout's, where the
    caller has it already."""
    if encoder._dflash_layout != "packed":
        return run_layers(encoder, hidden_states, attention_mask, keep_all)
    if packing is None:
        packing = _encoder_packing(attention_mask, hidden_states.device)
    # Every layer's states unpacked by one copy (DebertaV2Model asks for all).
    return unpack_layers(run_layers(encoder, hidden_states, attention_mask, keep_all, packing),
                         packing)


def run_layers(encoder: DebertaV2Encoder, hidden_states: torch.Tensor,
               attention_mask: torch.Tensor, keep_all: bool,
               packing: PackedLayout | None = None) -> list[torch.Tensor]:
    """The encoder's layers with the fused attention on padded `hidden_states` [B, L, H]: their
    output states, every layer's (`keep_all`) or the last one's, padded [B, L, H] each, or with
    `packing` the packed tokens' [T, H] each (not unpacked)."""
    slot_table = encoder.dflash_slot_table if encoder._dflash_positions_id >= 0 else None
    if packing is not None:
        states = pack(hidden_states, packing)
        layout = _PackedSequences(packing.cu_seqlens, packing.max_seqlen, slot_table,
                                  encoder._dflash_positions_id, ops.LaunchCache())
    else:
        states = hidden_states
        layout = _PaddedKeys((attention_mask != 0).contiguous(), slot_table,
                             encoder._dflash_positions_id, ops.LaunchCache())
    rel_embeddings = _RelativeEmbeddings(encoder) if encoder.relative_attention else None
    positions = None
    if rel_embeddings is not None:  # under torch.compile: all layers' tables at once
        positions = projections.layers_position_tables(
            [_self_attention(layer) for layer in encoder.layer], rel_embeddings)
    layer_states = []
    for index, layer in enumerate(encoder.layer):
        states = _layer_forward(layer, states, layout, rel_embeddings, encoder,
                                None if positions is None else positions[index])
        if index == 0 and encoder.conv is not None:
            # The ConvLayer mixes neighbouring positions: it runs on the padded layout.
            padded = unpack(states, packing) if packing is not None else states
            padded = encoder.conv(hidden_states, padded, attention_mask)
            states = pack(padded, packing) if packing is not None else padded
        if keep_all:
            layer_states.append(states)
    return layer_states if keep_all else [states]


def _fallback_reason(encoder, hidden_states, attention_mask, output_attentions,
                     query_states) -> str | None:
    if encoder._dflash_static_reason is not None:
        return encoder._dflash_static_reason
    if output_attentions:
        return "output_attentions=True needs the attention probabilities"
    if query_states is not None:
        return "query_states (z_steps > 1) are not supported"
    if attention_mask.dim() != 2:
        return "only a 2-D [batch, length] attention mask is supported"
    if hidden_states.device.type not in _KERNEL_DEVICES:
        return f"tensors on {hidden_states.device.type} (the kernel runs on CUDA devices)"
    if hidden_states.device.type == "cuda" and encoder._dflash_library_error is not None:
        return encoder._dflash_library_error
    if hidden_states.dtype not in _KERNEL_DTYPES:
        return f"dtype {hidden_states.dtype} (supported: float16, bfloat16, float32)"
    attention = encoder.layer[0].attention.self
    if torch.is_grad_enabled() and (hidden_states.requires_grad
                                    or attention.query_proj.weight.requires_grad
                                    or attention.key_proj.weight.requires_grad):
        return ("gradients are required and the kernel is forward-only; run under "
                "torch.no_grad() or torch.inference_mode()")
    if encoder.training and (attention.dropout.p > 0 or (
            attention.relative_attention and attention.pos_dropout.p > 0)):
        return "training mode with attention dropout"
    return None


class DflashDebertaV2Encoder(DebertaV2Encoder):
    """DebertaV2Encoder that runs its layers with the fused attention where it can."""

    def forward(self, hidden_states, attention_mask, output_hidden_states=True,
                output_attentions=False, query_states=None, relative_pos=None, return_dict=True):
        return encoder_forward(self, hidden_states, attention_mask, output_hidden_states,
                               output_attentions, query_states, relative_pos, return_dict)


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


def prepare_encoder(encoder: DebertaV2Encoder, *, layout: str, fallback: str,
                    graphs: EncoderGraphs | None = None) -> None:
    """Attaches what the kernel path needs to `encoder`: the slot table (a non-persistent buffer,
    so checkpoints keep their keys and .to() moves it), its positions id, the layout, the fallback
    mode, the graphs it replays (None: eager) and the reasons that rule the kernel out for this
    model whatever the inputs."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if fallback not in FALLBACK_MODES:
        raise ValueError(f"fallback must be one of {FALLBACK_MODES}, got {fallback!r}")
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
        encoder._buffers.pop("dflash_slot_table", None)
        with torch.inference_mode(False):  # a normal tensor even if prepared in inference mode
            slots = torch.tensor(table.table, dtype=torch.int32,
                                 device=encoder.rel_embeddings.weight.device)
        encoder.register_buffer("dflash_slot_table", slots, persistent=False)
    library_error = _native.load_error()
    encoder._dflash_layout = layout
    encoder._dflash_fallback = fallback
    encoder._dflash_graphs = graphs
    encoder._dflash_positions_id = positions_id
    encoder._dflash_static_reason = _static_reason(attention, settings, settled)
    encoder._dflash_library_error = (
        None if library_error is None else f"the attention library is unavailable: {library_error}")


def optimize_deberta(model: torch.nn.Module, *, layout: str = "padded", fallback: str = "warn",
                     cuda_graphs: bool = False, graph_length_multiple: int = 16,
                     max_graphs: int = 64) -> torch.nn.Module:
    """Swaps the attention of every DeBERTa-v2/v3 encoder in `model` for the fused kernel, in place.

    `model`: a transformers DebertaV2Model or any model holding one (sequence / token
    classification, question answering, ...). `layout`: "padded" or "packed" (see the module
    docstring). `fallback`: "warn" (stock forward with a one-time warning where the kernel cannot
    run), "error" (raise FallbackError instead) or "silent". `cuda_graphs`: record each
    encoder's forward as a CUDA graph per batch shape, lengths rounded up to
    `graph_length_multiple` (packed: also to 64, and the token count by at most an eighth), at
    most `max_graphs` kept, and replay it (encoder_graphs.py; for short sequences, where the host
    bounds the eager forward). Returns `model`.
    """
    encoders = [m for m in model.modules() if isinstance(m, DebertaV2Encoder)]
    if not encoders:
        raise TypeError(f"{type(model).__name__} holds no DeBERTa-v2/v3 encoder (DebertaV2Encoder)")
    for encoder in encoders:
        graphs = (EncoderGraphs(run_layers, graph_length_multiple, max_graphs) if cuda_graphs
                  else None)
        prepare_encoder(encoder, layout=layout, fallback=fallback, graphs=graphs)
        encoder.__class__ = DflashDebertaV2Encoder
    return model


def reset_graphs(model: torch.nn.Module) -> int:
    """Drops the CUDA graphs recorded by optimize_deberta(..., cuda_graphs=True) encoders in
    `model`, freeing their memory; later forwards record again. Returns how many were dropped."""
    dropped = 0
    for module in model.modules():
        graphs = module.__dict__.get("_dflash_graphs")
        if graphs is not None:
            dropped += len(graphs)
            graphs.clear()
    return dropped


_STATE = ("_dflash_layout", "_dflash_fallback", "_dflash_graphs", "_dflash_positions_id",
          "_dflash_static_reason", "_dflash_library_error")


def restore_deberta(model: torch.nn.Module) -> torch.nn.Module:
    """Undoes optimize_deberta in place."""
    for module in model.modules():
        if isinstance(module, DebertaV2Encoder) and "_dflash_layout" in module.__dict__:
            if isinstance(module, DflashDebertaV2Encoder):
                module.__class__ = DebertaV2Encoder
            module._buffers.pop("dflash_slot_table", None)
            for name in _STATE:
                module.__dict__.pop(name, None)
            projections.clear_caches(module)
    return model
