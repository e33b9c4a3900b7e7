#!/usr/bin/env python3
"""Writes the Hugging Face Hub "kernels" layout of dflash_torch from this repository's sources.

  OUT/README.md
  OUT/build/<variant>/metadata.json
  OUT/build/<variant>/dflash_torch/...   the package (Python modules, libdflash_attention.so,
                                          tuning profiles), its op namespace made build-unique

One variant per PyTorch minor (torch<XY>-cxx11-cu<CUDA>-x86_64-linux): the kernels loader picks a
variant by exact PyTorch version, and every variant holds the same files, since the library is
plain C loaded with ctypes and uses no PyTorch ABI. The layer is layers.DebertaV2Encoder
(python/src/dflash_torch/layers.py). Publishing is not done here.

Usage: python3 python/tools/make_hub_layout.py --library build/libdflash_attention.so --out DIR
           [--torch 2.9,2.10,2.11] [--cuda 13.0] [--archs 9.0a] [--license SPDX]
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "src" / "dflash_torch"
PROFILES = ROOT / "config" / "profiles"
NAME = "dflash-torch"
LIBRARY = "libdflash_attention.so"


def source_digest(library: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.glob("*.py")) + sorted(PROFILES.glob("*.yaml")) + [library]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def library_cuda_version(library: Path) -> str:
    version = ctypes.CDLL(str(library.resolve())).dflash_attention_cuda_version()
    return f"{version // 1000}.{version % 1000 // 10}"


def write_package(target: Path, library: Path, namespace: str) -> None:
    target.mkdir(parents=True)
    for path in sorted(PACKAGE.glob("*.py")):
        shutil.copy2(path, target / path.name)
    (target / "_namespace.py").write_text(
        '"""The torch.library namespace of this Hub build (unique per build)."""\n\n'
        f'NAMESPACE = "{namespace}"\n')
    shutil.copy2(library, target / LIBRARY)
    (target / "profiles").mkdir()
    for path in sorted(PROFILES.glob("*.yaml")):
        shutil.copy2(path, target / "profiles" / path.name)


README = """---
tags:
  - kernels
---
# dflash-torch

The fused disentangled-attention forward of DisentangledFlash Serve for transformers'
DeBERTa-v2/v3 models (inference), as a `kernels` layer `DebertaV2Encoder`:

```python
from kernels import LayerRepository, Mode, kernelize, replace_kernel_forward_from_hub, use_kernel_mapping
from transformers.models.deberta_v2.modeling_deberta_v2 import DebertaV2Encoder

replace_kernel_forward_from_hub(DebertaV2Encoder, "DebertaV2Encoder")
mapping = {{"DebertaV2Encoder": {{"cuda": LayerRepository(repo_id="<owner>/dflash-torch",
                                                        layer_name="DebertaV2Encoder")}}}}
with use_kernel_mapping(mapping):
    model = kernelize(model, mode=Mode.INFERENCE, device="cuda")
```

The layer prepares the model's encoder at its first forward (run one before `torch.compile`) and
falls back to the stock forward, warning once, where the kernel cannot run (CPU tensors, grads,
output_attentions, unsupported head dims or dtypes). Variants: {variants}. Built for CUDA
architectures {archs}; op namespace `{namespace}`.
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", type=Path, required=True, help=f"the built {LIBRARY}")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--torch", default="2.9,2.10,2.11", help="PyTorch minors, comma-separated")
    parser.add_argument("--cuda", help="CUDA major.minor (default: the library's runtime)")
    parser.add_argument("--archs", default="9.0a", help="CUDA architectures, comma-separated")
    parser.add_argument("--license", default="NOASSERTION",
                        help="SPDX license of the published build (the repository names none)")
    args = parser.parse_args()
    if not args.library.is_file():
        print(f"{args.library}: no such file", file=sys.stderr)
        return 2
    cuda = args.cuda or library_cuda_version(args.library)
    digest = source_digest(args.library)
    namespace = f"_dflash_torch_{digest}"
    if args.out.exists():
        shutil.rmtree(args.out)
    variants = []
    for torch_version in args.torch.split(","):
        major, minor = torch_version.strip().split(".")
        variant = f"torch{major}{minor}-cxx11-cu{cuda.replace('.', '')}-x86_64-linux"
        variant_dir = args.out / "build" / variant
        write_package(variant_dir / "dflash_torch", args.library, namespace)
        metadata = {
            "name": NAME,
            "id": namespace,
            "version": 1,
            "license": args.license,
            "backend": {"type": "cuda", "archs": args.archs.split(",")},
            "python-depends": [],
        }
        (variant_dir / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
        variants.append(variant)
    (args.out / "README.md").write_text(README.format(variants=", ".join(variants),
                                                      archs=args.archs, namespace=namespace))
    print(f"wrote {args.out}: {len(variants)} variants ({', '.join(variants)}), namespace "
          f"{namespace}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
