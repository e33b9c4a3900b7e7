#!/usr/bin/env python3
"""Creates full-size random-weight DeBERTa sequence classifiers shaped like the public checkpoints,
for the CUDA engine's benchmark and parity checks.

For each shape, OUT/<shape>/ gets config.json (every field of the public config,
docs/deberta.md#public-checkpoints, plus the classification head) and model.safetensors in
float32 with transformers' tensor names, which is what engine/model/checkpoint.cc loads (no
tokenizer file is needed to run ids).

Weights: every Linear/Embedding weight ~ N(0, init_std) (default 0.05 * sqrt(768 / hidden): the
same per-layer gain for every width, 0.05 at v3-base width), biases ~ N(0, 0.02), LayerNorm gains
1 + N(0, 0.05) and shifts N(0, 0.02), drawn on the target device from one seeded generator per
shape. The classifier is then rescaled on a probe of MNLI-like pairs so that, in float32, each
logit has mean 0 and standard deviation 1 across inputs: top-2 margins vary from pair to pair and
the argmax is not the same label everywhere.

    python3 bench/engine/make_random_models.py --out /tmp/dfe/models \
        --shapes v3-base,v3-large,v2-xlarge --num-labels 3 --seed 0 [--device cuda]

Sizes (float32): v3-base 0.69 GiB, v3-large 1.6 GiB, v2-xlarge 3.3 GiB (never commit them).
Created on cuda when available (seconds); v2-xlarge on a CPU takes minutes.
"""
import argparse
import json
import os
import shutil
import time

import numpy as np
import safetensors.torch
import torch
import transformers
from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

import engine_common as common

PROBE_PAIRS = 64


def build_config(shape, num_labels):
    fields = {k: v for k, v in common.SHAPES[shape].items() if k != "model_type"}
    labels = {i: f"LABEL_{i}" for i in range(num_labels)}
    config = DebertaV2Config(**fields, id2label=labels, label2id={v: k for k, v in labels.items()})
    config.architectures = ["DebertaV2ForSequenceClassification"]
    return config


def randomize(model, generator, init_std):
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator, device=param.device,
                                dtype=torch.float32)
            if name.endswith("LayerNorm.weight"):
                param.copy_(1.0 + 0.05 * noise)
            elif name.endswith(".bias"):
                param.copy_(0.02 * noise)
            else:
                param.copy_(init_std * noise)


def calibrate_classifier(model, probe, device):
    """Sets classifier = random directions scaled so each logit is N(0, 1) over the probe."""
    with torch.inference_mode():
        ids, mask = common.pad_batch(probe, device)
        hidden = model.deberta(input_ids=ids, attention_mask=mask)[0]
        pooled = model.pooler(hidden).double()
    centered = pooled - pooled.mean(0)
    # How much the pooled feature depends on the input at all: a ratio near 0 would mean the
    # calibration only amplifies rounding noise.
    sensitivity = float(centered.norm(dim=1).mean() / pooled.mean(0).norm())
    weight = model.classifier.weight.detach().double()
    z = pooled @ weight.T
    scale = z.std(0)
    with torch.no_grad():
        model.classifier.weight.copy_((weight / scale[:, None]).float())
        model.classifier.bias.copy_((-z.mean(0) / scale).float())
    return sensitivity


def probe_summary(model, probe, device):
    with torch.inference_mode():
        ids, mask = common.pad_batch(probe, device)
        logits = model(input_ids=ids, attention_mask=mask).logits.double().cpu().numpy()
    top2 = np.sort(logits, axis=1)[:, -2:] if logits.shape[1] > 1 else None
    summary = {"logit_std": round(float(logits.std()), 3),
               "argmax_counts": np.bincount(logits.argmax(1), minlength=logits.shape[1]).tolist()}
    if top2 is not None:
        margin = top2[:, 1] - top2[:, 0]
        summary["top2_margin_p10_p50_p90"] = [round(float(x), 3)
                                              for x in np.percentile(margin, [10, 50, 90])]
    return summary


def make_model(shape, num_labels, seed, init_std, out_dir, device):
    start = time.time()
    config = build_config(shape, num_labels)
    with torch.device(device):
        model = DebertaV2ForSequenceClassification(config).eval()
    generator = torch.Generator(device=device).manual_seed(seed)
    randomize(model, generator, init_std)
    probe = common.mnli_like_pairs(PROBE_PAIRS, seed + 1000)
    sensitivity = calibrate_classifier(model, probe, device)
    summary = probe_summary(model, probe, device)

    model_dir = os.path.join(out_dir, shape)
    shutil.rmtree(model_dir, ignore_errors=True)
    os.makedirs(model_dir)
    config.save_pretrained(model_dir)
    state = {k: v.detach().to("cpu", torch.float32).contiguous()
             for k, v in model.state_dict().items() if not k.endswith("position_ids")}
    path = os.path.join(model_dir, "model.safetensors")
    safetensors.torch.save_file(state, path, metadata={"format": "pt"})
    params = sum(v.numel() for v in state.values())
    info = {"shape": shape, "dir": model_dir, "parameters": params,
            "file_gib": round(os.path.getsize(path) / 2**30, 3), "seed": seed, "device": device,
            "init_std": round(init_std, 5), "input_sensitivity": round(sensitivity, 4),
            "probe_fp32": summary, "seconds": round(time.time() - start, 1)}
    common.log(json.dumps(info))
    del model, state
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return info


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder; one subfolder per shape")
    parser.add_argument("--shapes", default="v3-base,v3-large,v2-xlarge",
                        help="comma-separated, from: " + ",".join(common.SHAPES))
    parser.add_argument("--num-labels", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--init-std", type=float, default=None,
                        help="standard deviation of the Linear/Embedding weights "
                             "(default: 0.05 * sqrt(768 / hidden_size))")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    # Exact float32 for the probe (cuDNN TF32 would touch the v2-xlarge ConvLayer).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = [s for s in shapes if s not in common.SHAPES]
    if unknown:
        parser.error(f"unknown shapes {unknown}; known: {list(common.SHAPES)}")
    os.makedirs(args.out, exist_ok=True)
    common.log(f"transformers {transformers.__version__}, torch {torch.__version__}, "
               f"device {args.device}")
    infos = []
    for index, shape in enumerate(shapes):
        init_std = args.init_std or 0.05 * (768 / common.SHAPES[shape]["hidden_size"]) ** 0.5
        infos.append(make_model(shape, args.num_labels, args.seed + index, init_std, args.out,
                                args.device))
    print(json.dumps(infos, indent=1))


if __name__ == "__main__":
    main()
