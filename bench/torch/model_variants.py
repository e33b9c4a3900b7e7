"""The DeBERTa sequence classifiers compared by the dflash_torch benchmarks, each a callable
(ids, mask, host_mask=None) -> logits on the same checkpoint. `host_mask` is the mask's pinned
host copy: the packed variants build their layout from it (packing.packed_layout on the host, then
stream-ordered copies) instead of reading the device mask, which waits for the queued work.

  stock        transformers eager (the only DeBERTa-v2 attention in transformers 5.17)
  ours         dflash_torch.optimize_deberta, layout "padded" (key mask) or "packed" (cu_seqlens)
  ours_graphs  "ours" padded or packed with cuda_graphs=True (an encoder graph per batch shape,
               and for packed per rounded token count, replayed)
  ours_floor   timing only: "ours" with the attention op replaced by nothing (its context is V),
               so every other module of the layer runs as in "ours": the floor no attention-only
               replacement can go below (its logits are meaningless)
  df           DisentangledFlash 1.1.1 optimize_deberta(model.deberta): "padded" prepares its
               per-length position plans for every padded length the run will use
               (sequence_lengths=..., as its documentation asks) and activates the batch's length
               before each call; "packed" packs the embeddings and runs its encoder.forward_packed
  fd           FlashDeBERTa 0.0.8: its FlashDisentangledSelfAttention in place of transformers'
               (what its own model classes hold), padded input (it unpads internally)

Every variant gets its own copy of the model, so parameters are never shared across variants.
"""
import contextlib
import copy
import importlib.metadata
import sys
import types
from pathlib import Path

import torch

try:  # the installed package, else the source tree
    import dflash_torch  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "src"))

import dflash_torch  # noqa: E402
from dflash_torch import packing  # noqa: E402


def load_classifier(path, device, dtype):
    from transformers import AutoModelForSequenceClassification
    model = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32)
    return model.eval().to(device=device, dtype=dtype)


def peer_versions():
    versions = {}
    for name in ("disentangled-flash", "flashdeberta", "transformers", "torch", "triton"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _classify_packed_hidden(model, last_hidden_packed, layout):
    """Pooler + classifier of a sequence classifier on packed last hidden states: the first token
    of each sequence, as ContextPooler reads it from a padded batch."""
    first = last_hidden_packed.index_select(0, layout.cu_seqlens[:-1].long())
    return model.classifier(model.pooler(first.unsqueeze(1)))


def stock(model):
    return lambda ids, mask, host_mask=None: model(input_ids=ids, attention_mask=mask).logits


def _packed_layout(mask, host_mask):
    if host_mask is None:
        return packing.packed_layout(mask)
    return packing.packed_layout(host_mask).to(mask.device)


def ours(model, layout, **options):
    model = dflash_torch.optimize_deberta(copy.deepcopy(model), layout=layout, fallback="error",
                                          **options)
    if layout == "padded":
        return lambda ids, mask, host_mask=None: model(input_ids=ids, attention_mask=mask).logits

    def run(ids, mask, host_mask=None):
        with dflash_torch.use_packed_layout(_packed_layout(mask, host_mask)):
            return model(input_ids=ids, attention_mask=mask).logits
    return run


@contextlib.contextmanager
def _attention_skipped():
    """While active, dflash_torch's patched attention returns V as its context (no kernel)."""
    from dflash_torch import deberta as patched
    real = patched.ops
    patched.ops = types.SimpleNamespace(
        run_padded=lambda q, k, v, *rest, **options: (v, None),
        run_packed=lambda q, k, v, *rest, **options: (v, None),
        LaunchCache=real.LaunchCache)
    try:
        yield
    finally:
        patched.ops = real


def ours_floor(model, layout):
    run = ours(model, layout)

    def run_floor(ids, mask, host_mask=None):
        with _attention_skipped():
            return run(ids, mask, host_mask)
    return run_floor


def df(model, layout, lengths):
    import disentangled_flash
    model = copy.deepcopy(model)
    if layout == "padded":
        if not lengths:
            raise ValueError("DisentangledFlash padded needs the padded lengths to prepare")
        disentangled_flash.optimize_deberta(model.deberta, sequence_lengths=sorted(lengths))

        def run_padded(ids, mask, host_mask=None):
            model.deberta.encoder.activate_shape(ids.shape[1])
            return model(input_ids=ids, attention_mask=mask).logits
        return run_padded
    disentangled_flash.optimize_deberta(model.deberta)

    def run(ids, mask, host_mask=None):
        embeddings = model.deberta.embeddings(input_ids=ids, mask=mask)
        layout_ = _packed_layout(mask, host_mask)
        hidden = packing.pack(embeddings, layout_)
        out = model.deberta.encoder.forward_packed(hidden, layout_.cu_seqlens,
                                                   layout_.max_seqlen, output_hidden_states=False)
        return _classify_packed_hidden(model, out.last_hidden_state, layout_)
    return run


def fd(model):
    from flashdeberta import FlashDisentangledSelfAttention
    model = copy.deepcopy(model)
    for layer in model.deberta.encoder.layer:
        layer.attention.self.__class__ = FlashDisentangledSelfAttention
    return lambda ids, mask, host_mask=None: model(input_ids=ids, attention_mask=mask).logits


def make(name, model, lengths=()):
    """`name`: stock, ours_padded, ours_packed, ours_floor_padded, ours_floor_packed,
    ours_graphs_padded, ours_graphs_packed, df_padded, df_packed, fd. `lengths`: the padded
    lengths of the batches the variant will see (df_padded prepares one plan per length)."""
    if name == "stock":
        return stock(model)
    if name.startswith("ours_floor_"):
        return ours_floor(model, name[len("ours_floor_"):])
    if name.startswith("ours_graphs_"):
        return ours(model, name[len("ours_graphs_"):], cuda_graphs=True)
    if name.startswith("ours_"):
        return ours(model, name[len("ours_"):])
    if name.startswith("df_"):
        return df(model, name[len("df_"):], lengths)
    if name == "fd":
        return fd(model)
    raise ValueError(f"unknown variant {name}")
