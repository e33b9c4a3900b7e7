#!/usr/bin/env python3
"""Converts a checkpoint directory that only has pytorch_model.bin (a pickled PyTorch file) into
model.safetensors. DisentangledFlash Serve reads pytorch_model.bin in PyTorch's zip format itself;
this is for files in the legacy format of PyTorch before 1.6, which it refuses, and for those who
prefer safetensors. Run once per checkpoint:

    pip install torch safetensors
    python3 scripts/convert_pytorch_checkpoint.py /path/to/model-dir

The directory keeps its pytorch_model.bin; model.safetensors is written beside it. Sharded files
(pytorch_model.bin.index.json + pytorch_model-0000N-of-0000M.bin) become model.safetensors.index.json
and model-0000N-of-0000M.safetensors. Tensors are stored with their own dtype; tensors that share
storage are cloned, because safetensors has no aliasing.
"""
import argparse
import json
import os
import sys


def load_state(path, torch):
    # weights_only refuses arbitrary pickled objects: a checkpoint should only hold tensors.
    state = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    tensors = {}
    for name, value in state.items():
        if not isinstance(value, torch.Tensor):
            raise SystemExit(f"{path}: entry {name!r} is not a tensor ({type(value).__name__})")
        tensors[name] = value.detach().clone().contiguous()
    return tensors


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", help="checkpoint directory with pytorch_model.bin")
    parser.add_argument("--force", action="store_true", help="overwrite existing safetensors")
    args = parser.parse_args()
    try:
        import torch
        from safetensors.torch import save_file
    except ImportError as error:
        sys.exit(f"needs torch and safetensors ({error}); run: pip install torch safetensors")

    single = os.path.join(args.model_dir, "pytorch_model.bin")
    index = os.path.join(args.model_dir, "pytorch_model.bin.index.json")
    if os.path.exists(single):
        out = os.path.join(args.model_dir, "model.safetensors")
        if os.path.exists(out) and not args.force:
            sys.exit(f"{out} exists; pass --force to overwrite")
        tensors = load_state(single, torch)
        save_file(tensors, out, metadata={"format": "pt"})
        print(f"wrote {out}: {len(tensors)} tensors")
        return
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        new_map = {}
        for shard in sorted(set(weight_map.values())):
            if os.path.basename(shard) != shard:
                sys.exit(f"{index}: shard name {shard!r} is not a plain file name")
            target = shard.replace("pytorch_model", "model").replace(".bin", ".safetensors")
            out = os.path.join(args.model_dir, target)
            if os.path.exists(out) and not args.force:
                sys.exit(f"{out} exists; pass --force to overwrite")
            tensors = load_state(os.path.join(args.model_dir, shard), torch)
            save_file(tensors, out, metadata={"format": "pt"})
            for name in tensors:
                new_map[name] = target
            print(f"wrote {out}: {len(tensors)} tensors")
        out_index = os.path.join(args.model_dir, "model.safetensors.index.json")
        with open(out_index, "w") as f:
            json.dump({"metadata": {}, "weight_map": new_map}, f, indent=2)
        print(f"wrote {out_index}")
        return
    sys.exit(f"{args.model_dir}: no pytorch_model.bin or pytorch_model.bin.index.json")


if __name__ == "__main__":
    main()
