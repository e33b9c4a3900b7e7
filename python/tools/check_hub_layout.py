#!/usr/bin/env python3
"""Loads the Hub layout of dflash_torch through the `kernels` package (PyPI) and runs its layer.

Writes the layout (make_hub_layout.py) unless --layout names one, then:
  1. kernels.get_local_kernel picks this system's variant and imports it; the module exposes
     layers.DebertaV2Encoder and the ops under the build's own namespace;
  2. kernelize (Mode.INFERENCE, on --device, no fallback) swaps the forward of a small random
     transformers DeBERTa-v3-shaped model's encoder for the layer, which kernels validates
     (stateless, same forward signature);
  3. the model runs on --device: on "cpu" the layer falls back to the stock forward with its
     one-time warning (outputs equal stock bit for bit); on "cuda" the kernel runs and logits must
     match stock float32 within 1e-4 relative L2.
Exit status 0 when every step holds. No network: nothing is downloaded.

Usage: python3 python/tools/check_hub_layout.py --library build/libdflash_attention.so
           [--layout DIR] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", type=Path, help="libdflash_attention.so (to write a layout)")
    parser.add_argument("--layout", type=Path, help="an existing layout (skips writing one)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    temporary = None
    layout = args.layout
    if layout is None:
        if args.library is None:
            parser.error("--library or --layout is needed")
        temporary = tempfile.TemporaryDirectory()
        layout = Path(temporary.name) / "dflash-torch"
        subprocess.run([sys.executable, str(HERE / "make_hub_layout.py"), "--library",
                        str(args.library), "--out", str(layout)], check=True)

    import kernels
    import torch
    from kernels import (LocalLayerRepository, Mode, kernelize, replace_kernel_forward_from_hub,
                         use_kernel_mapping)
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification
    from transformers.models.deberta_v2.modeling_deberta_v2 import DebertaV2Encoder

    module = kernels.get_local_kernel(layout)
    layer = module.layers.DebertaV2Encoder
    namespace = module.ops.attention_padded._qualname.split("::")[0]
    print(f"loaded {module.__name__} from {layout}: layer {layer.__qualname__}, ops "
          f"torch.ops.{namespace}, can_torch_compile={layer.can_torch_compile}, "
          f"has_backward={layer.has_backward}")

    torch.manual_seed(0)
    config = DebertaV2Config(vocab_size=128, hidden_size=128, num_hidden_layers=2,
                             num_attention_heads=2, intermediate_size=256,
                             max_position_embeddings=512, relative_attention=True,
                             position_buckets=256, pos_att_type=["p2c", "c2p"],
                             share_att_key=True, norm_rel_ebd="layer_norm",
                             position_biased_input=False, type_vocab_size=0, num_labels=3)
    stock = DebertaV2ForSequenceClassification(config).eval().to(args.device)
    model = copy.deepcopy(stock)
    replace_kernel_forward_from_hub(DebertaV2Encoder, "DebertaV2Encoder")
    repository = LocalLayerRepository(repo_path=layout, layer_name="DebertaV2Encoder")
    # On a CPU-only host the layer is mapped for "cpu" (kernelize's "cuda" mapping asks the GPU
    # for its compute capability); its forward then takes the stock fallback.
    mapping = {"DebertaV2Encoder": {args.device: repository}}
    with use_kernel_mapping(mapping):
        kernelize(model, mode=Mode.INFERENCE, device=args.device, use_fallback=False)
    bound = getattr(model.deberta.encoder.forward, "__func__", None)
    if bound is not layer.forward:
        print("FAIL: kernelize did not install the layer's forward")
        return 1
    print("kernelize installed layers.DebertaV2Encoder.forward on the model's encoder")

    ids = torch.randint(1, 128, (3, 40), device=args.device)
    mask = torch.ones_like(ids)
    mask[1, 25:] = 0
    mask[2, 9:] = 0
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = model(input_ids=ids, attention_mask=mask).logits
        expected = stock(input_ids=ids, attention_mask=mask).logits
    fallbacks = [str(w.message) for w in caught if "dflash_torch" in str(w.message)]
    if args.device == "cpu":
        if not fallbacks or "tensors on cpu" not in fallbacks[0]:
            print(f"FAIL: expected the CPU fallback warning, got {fallbacks}")
            return 1
        if not torch.equal(got, expected):
            print("FAIL: the CPU fallback differs from stock")
            return 1
        print(f"cpu: stock fallback, outputs equal; warning: {fallbacks[0]}")
    else:
        if fallbacks:
            print(f"FAIL: the kernel did not run: {fallbacks}")
            return 1
        error = float((got.double() - expected.double()).norm() / expected.double().norm())
        print(f"cuda: kernel ran; logits relative L2 against stock float32 {error:.3e}")
        if error > 1e-4:
            print("FAIL: above 1e-4")
            return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
