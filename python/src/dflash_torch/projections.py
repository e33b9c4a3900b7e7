"""The attention's projections with fewer launches: Q, K and V by one GEMM, and the layers'
projected position tables computed once instead of every forward.

Q, K and V share their input, so one GEMM over the three weights stacked ([3 H*d, H]) replaces
three; the result is split into column views, which the ops take as they are (row stride 3 H*d).
The stacked weight and bias, and each layer's PosK / PosQ (projections of the relative
embeddings, which depend on parameters only), are cached in the attention module's __dict__: not
parameters or buffers, so state_dict, checkpoints and save_pretrained never see them. A cache
entry holds a stamp of its source parameters (version counter, data pointer) and is rebuilt when
any of them changes: in-place updates (load_state_dict, optimizer steps, `weight.add_()` under
no_grad) bump the version counter, `.to()` and `.data =` change the pointer. The entry also
keeps aliases of its sources, so their memory cannot be freed and reused by a new tensor (of any
dtype or shape) at the same address while the stamp refers to it; only a new view of the same
storage at the same address (`.data = weight.view(...)`) would go unseen.

Caching is off, and each forward computes from the parameters as transformers does, when:
a source is an inference tensor (made under inference_mode, e.g. a model copied there), autograd
needs the result (grad mode on and a source requires grad: the stacked weight is then
a differentiable torch.cat), torch.compile traces (a version counter is a run-time value the
graph cannot branch on), or a projection is not a plain nn.Linear or carries forward hooks or a
replaced forward (which must run: the projections are then called one by one).

Under torch.compile the launches are still fewer: the graph stacks Q / K / V's weights itself
(one copy of them per forward for two fewer GEMMs per layer), and every layer's PosK and PosQ come
from one batched GEMM each over the layers' stacked weights (layers_position_tables). A compiled
forward at MNLI-like sizes is bound by the host's launches, not by these copies.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.nn.modules import module as _module

_QKV = "_dflash_qkv_cache"
_POSITIONS = "_dflash_positions_cache"
CACHE_ATTRIBUTES = (_QKV, _POSITIONS)


def _stamp(tensors) -> list | None:
    # (version, pointer) suffices: the entry's aliases keep a source's storage alive, so a tensor
    # of another dtype, device or shape cannot appear at its address. None: a source is an
    # inference tensor, whose in-place updates (inside inference_mode) no counter records.
    try:
        return [(t._version, t.data_ptr()) for t in tensors]
    except RuntimeError:
        return None


def hooked(modules) -> bool:
    """Whether calling `modules` does more than their class's forward: forward hooks (theirs or
    global) or a forward replaced on the instance (as accelerate's hooks do). Such modules must
    be called, never bypassed."""
    return bool(_module._global_forward_hooks or _module._global_forward_pre_hooks) or any(
        m._forward_hooks or m._forward_pre_hooks or "forward" in m.__dict__ for m in modules)


def _parameters(modules) -> list[torch.Tensor]:
    # _parameters directly: nn.Module.__getattr__ is a slow path, and this runs per layer.
    return [t for m in modules for t in m._parameters.values() if t is not None]


def _needs_autograd(tensors) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _cached(owner: nn.Module, attribute: str, sources: list[torch.Tensor],
            build: Callable[[], object]):
    """build()'s value, reused while `sources` are unchanged (stamp in the module docstring)."""
    stamp = _stamp(sources)
    if stamp is None:
        return build()
    entry = owner.__dict__.get(attribute)
    if entry is not None and entry[0] == stamp:
        return entry[2]
    # Plain tensors even inside inference_mode, so a later no_grad forward can use them too.
    with torch.inference_mode(False), torch.no_grad():
        value = build()
    owner.__dict__[attribute] = (stamp, tuple(t.detach() for t in sources), value)
    return value


def clear_caches(module: nn.Module) -> None:
    """Drops every cache entry below `module` (restore_deberta)."""
    for child in module.modules():
        for attribute in CACHE_ATTRIBUTES:
            child.__dict__.pop(attribute, None)


def _uniform(projections) -> bool:
    """Whether these nn.Linear projections have biases and weights of one shape, and all of them
    one dtype and device, so that one GEMM over their stacked weights stands for them."""
    weights = [p.weight for p in projections]
    biases = [p.bias for p in projections]
    first = weights[0]
    return not (any(b is None for b in biases) or any(
        t.shape[0] != first.shape[0] or t.dtype != first.dtype or t.device != first.device
        for t in weights + biases) or any(w.shape != first.shape for w in weights))


def _stacked(projections):
    """([Wq; Wk; Wv], [bq; bk; bv]), or None where the three do not stack into one GEMM (checked
    when the stack is built, not per forward)."""
    if not _uniform(projections):
        return None
    return (torch.cat([p.weight for p in projections]),
            torch.cat([p.bias for p in projections]))


def query_key_value(attention: nn.Module, hidden_states: torch.Tensor):
    """(query, key, value) = the attention's query_proj / key_proj / value_proj of
    `hidden_states`, by one GEMM where the three fuse: views of one [..., 3 H*d] result."""
    modules = attention._modules
    projections = (modules["query_proj"], modules["key_proj"], modules["value_proj"])
    if hooked(projections) or any(type(p) is not nn.Linear for p in projections):
        return tuple(p(hidden_states) for p in projections)
    if torch.compiler.is_compiling():
        stacked = _stacked(projections)  # in the graph: it sees every weight update
    else:
        sources = _parameters(projections)
        stacked = (_stacked(projections) if _needs_autograd(sources)
                   else _cached(attention, _QKV, sources, lambda: _stacked(projections)))
    if stacked is None:
        return tuple(p(hidden_states) for p in projections)
    return nn.functional.linear(hidden_states, *stacked).chunk(3, dim=-1)


def _position_projections(attention: nn.Module):
    """(the module projecting PosK, the one projecting PosQ), None where the layer has no c2p /
    p2c."""
    c2p, p2c = "c2p" in attention.pos_att_type, "p2c" in attention.pos_att_type
    modules = attention._modules
    if attention.share_att_key:
        return (modules["key_proj"] if c2p else None, modules["query_proj"] if p2c else None)
    return (modules["pos_key_proj"] if c2p else None, modules["pos_query_proj"] if p2c else None)


def _batchable(projections) -> bool:
    """Whether one batched GEMM can stand for these projections (one per layer): plain
    nn.Linear modules, none hooked, _uniform."""
    return (all(p is not None and type(p) is nn.Linear for p in projections)
            and not hooked(projections) and _uniform(projections))


def layers_position_tables(attentions: list[nn.Module],
                           rel_embeddings: Callable[[], torch.Tensor]):
    """Under torch.compile: every layer's (pos_key, pos_query), as position_tables gives them, by
    one batched GEMM per term, PosK_l = R Wk_l^T + bk_l for all l at once ([layers, 2k, H*d],
    R = the first 2k relative embeddings [2k, H]). None outside compile (the cache serves) or
    where the layers' projections do not batch (then position_tables per layer)."""
    if not torch.compiler.is_compiling() or not attentions:
        return None
    first = attentions[0]
    if any(not a.relative_attention or a.pos_ebd_size != first.pos_ebd_size
           or set(a.pos_att_type) != set(first.pos_att_type)
           or a.share_att_key != first.share_att_key for a in attentions):
        return None
    terms = list(zip(*(_position_projections(a) for a in attentions)))  # (key projs, query projs)
    if any(term[0] is not None and not _batchable(term) for term in terms):
        return None
    relative = rel_embeddings()[:2 * first.pos_ebd_size]

    def batched(projections):
        if projections[0] is None:
            return [None] * len(projections)
        weights = torch.stack([p.weight for p in projections]).transpose(1, 2)
        biases = torch.stack([p.bias for p in projections]).unsqueeze(1)
        return torch.baddbmm(biases, relative.expand(len(projections), -1, -1), weights).unbind(0)

    return list(zip(*(batched(term) for term in terms)))


def position_tables(encoder: nn.Module, attention: nn.Module,
                    rel_embeddings: Callable[[], torch.Tensor]):
    """(pos_key, pos_query) of one layer, [2k, H*d] each or None where the layer has no c2p /
    p2c: its projections of the first 2k relative embeddings (`rel_embeddings()` returns the
    encoder's, LayerNorm-ed; called only when they are computed). Eval mode: pos_dropout is off."""
    key_proj, query_proj = _position_projections(attention)

    def project():
        relative = rel_embeddings()[:2 * attention.pos_ebd_size]
        return (key_proj(relative) if key_proj is not None else None,
                query_proj(relative) if query_proj is not None else None)

    if torch.compiler.is_compiling():
        return project()
    called = [p for p in (key_proj, query_proj) if p is not None]
    if "layer_norm" in encoder.norm_rel_ebd:
        called.append(encoder._modules["LayerNorm"])
    sources = _parameters(called + [encoder._modules["rel_embeddings"]])
    if hooked(called) or _needs_autograd(sources):
        return project()
    return _cached(attention, _POSITIONS, sources, project)
