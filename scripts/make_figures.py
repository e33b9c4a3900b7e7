#!/usr/bin/env python3
"""Draws the committed benchmark results of bench/results/ as the PNG figures of docs/figures/.

    pip install matplotlib
    python3 scripts/make_figures.py

It reads only files under bench/results/ and writes four figures, deterministically: fixed sizes,
dpi and fonts, and no software or time stamp in the PNG metadata, so that a rerun with the same
matplotlib version writes the same bytes (another version may move a few pixels):

  attention-by-length.png   h200-attention.json: our fused disentangled attention against the
                            Triton peers (FlashDeBERTa, DisentangledFlash) and plain SDPA by
                            sequence length, BF16 and FP16 at 12 x 64 heads, and the packed
                            MNLI-like mix
  engine-vs-transformers.png  h200-engine.json: the CUDA engine against transformers eager, end
                            to end, time per workload and peak memory at 8192 tokens
  served-latency.png        loadtest-*.json, soak-cpu-2core.json, overload-deadlines.json and,
                            when present, h200-serving.json: p50 / p99 latency by request rate
  overload-goodput.png      overload-deadlines.json: OK answers per second at 2x overload, this
                            build against the earlier one, and the server's OK count against
                            the clients'

A missing or malformed input that a figure needs stops the script with the file and field named
(exit status 1). Optional inputs (soak-cpu-2core.json, h200-serving.json, further loadtest-*.json)
are drawn when present. Of overload-deadlines.json's runs, the latency figure draws those on the
2-core machine (their OK answers' p99 at the offered rate); the goodput figure draws them all.

loadtest-<source>-<rest>.json is a dflash-loadtest report (loadtest/report.cc). <source> says
where it ran (SOURCES below); an unknown one is drawn on the H200 panel when it starts with "h200",
else on the CPU machine's demo-model panel, under its own name. Fields read: config.mode ("closed",
"constant", "poisson"), config.concurrency, config.workload, measured.offered_rate_per_s (open
loop), measured.ok_rate_per_s, latency_ms.p50, latency_ms.p99.

h200-serving.json (the served path on an H200, optional; bench/serving_results.py writes it) is
read as {"servers": {label: {"poisson": [row, ...], ...}, ...}, ...}: each row an open-loop
Poisson run with "rate" (offered calls/s), "p50_ms" and "p99_ms"; each server's rows draw as one
latency-against-offered-rate curve on the H200 panel (a run the server could not hold shows as
its jump in p99). Other fields are not drawn.
"""
import argparse
import glob
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Fixed size and resolution: about 1000 px wide, the README's width, so that text stays legible.
DPI = 100
WIDE = (10.0, 4.2)

# Panels of the latency figure: the demo model on the CPU engine and the null engine (the server's
# own cost) on the 2-core machine, the CUDA engine on the H200 host.
MODEL_PANEL = "model"
NULL_PANEL = "null"
GPU_PANEL = "gpu"
PANEL_TITLES = {
    MODEL_PANEL: ("2-core x86-64 (Debian 12): demo model,\n"
                  "CPU engine, server and generator together"),
    NULL_PANEL: "same machine: null engine\n(the server's own cost)",
    GPU_PANEL: "H200 host: demo model,\nCUDA engine fp16",
}
# Where each loadtest-<source>-*.json ran and on what: panel, series name.
SOURCES = {
    "null": (NULL_PANEL, "null engine"),
    "cpu": (MODEL_PANEL, "CPU engine"),
    "h200": (GPU_PANEL, "1 H200"),
    "h200x2": (GPU_PANEL, "2 H200"),
}

OURS_COLOR = "#c0392b"
FD_COLOR = "#2e86c1"
DF_COLOR = "#28a745"
SDPA_COLOR = "#555555"
HF_COLOR = "#7f8c8d"
EARLIER_COLOR = "#95a5a6"


class InputError(Exception):
    """A results file that is absent or lacks a field a figure needs."""


def shown_path(results, name):
    """A results file's path as error messages name it: relative to the working directory."""
    return os.path.relpath(os.path.join(results, name))


def load_json(results, name, required=True):
    path = shown_path(results, name)
    if not os.path.exists(path):
        if required:
            raise InputError(f"{path}: missing (needed for the figures)")
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: unreadable JSON: {e}") from e


def field(obj, dotted, where):
    """obj's field by a dotted path; a missing or null value is an InputError naming it."""
    value = obj
    for key in dotted.split("."):
        if not isinstance(value, dict) or value.get(key) is None:
            raise InputError(f"{where}: missing field {dotted}")
        value = value[key]
    return value


def number(obj, dotted, where):
    value = field(obj, dotted, where)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: field {dotted} is not a number: {value!r}")
    return float(value)


def optional_number(obj, key):
    value = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def length_label(length):
    return f"{length // 1024}k" if length >= 4096 else str(length)


def ratio_label(ratio):
    return f"{ratio:.1f}×" if ratio < 10 else f"{ratio:.0f}×"


def milliseconds(value):
    return f"{value:,.0f} ms" if value >= 100 else f"{value:.3g} ms"


def title(fig, text, source):
    fig.suptitle(f"{text}\nsource: bench/results/{source}", fontsize=11)


def save(fig, out, name, written):
    path = os.path.join(out, name)
    # No Software entry: the PNG then holds nothing that changes between runs.
    fig.savefig(path, dpi=DPI, metadata={"Software": None}, pil_kwargs={"optimize": True})
    written.append(path)


# Figure 1: attention time by L.

def attention_rows(doc, where):
    rows = field(doc, "rows", where)
    if not isinstance(rows, list):
        raise InputError(f"{where}: rows is not a list")
    for i, row in enumerate(rows):
        for key in ("shape", "dtype"):
            field(row, key, f"{where}: rows[{i}]")
        for key in ("L", "B", "head_dim", "heads", "ours_ms"):
            number(row, key, f"{where}: rows[{i}]")
    return rows


def select(rows, shape, dtype, head_dim=64, heads=12):
    picked = [r for r in rows if r["shape"] == shape and r["dtype"] == dtype and
              r["head_dim"] == head_dim and r["heads"] == heads]
    return sorted(picked, key=lambda r: r["L"])


def draw_attention_panel(ax, rows, plain_rows, label):
    lengths = [r["L"] for r in rows]
    series = [
        ("ours (with position terms)", "ours_ms", OURS_COLOR, "-", "o"),
        ("FlashDeBERTa 0.0.8, faster layout", "fd_ms", FD_COLOR, "-", "s"),
        ("DisentangledFlash 1.1.1, faster layout", "df_ms", DF_COLOR, "-", "D"),
        ("SDPA cuDNN (no position terms)", "sdpa_cudnn_ms", SDPA_COLOR, "--", "v"),
        ("SDPA flash (no position terms)", "sdpa_flash_ms", SDPA_COLOR, ":", "^"),
    ]
    for name, key, color, style, marker in series:
        points = [(r["L"], optional_number(r, key)) for r in rows]
        points = [(x, y) for x, y in points if y is not None]
        if points:
            ax.plot(*zip(*points), style, color=color, marker=marker, markersize=4, lw=1.4,
                    label=name)
    if plain_rows:
        ax.plot([r["L"] for r in plain_rows], [r["ours_ms"] for r in plain_rows], "-.",
                color=OURS_COLOR, lw=1.0, alpha=0.6, label="ours, no position terms")
    for r in rows:
        peers = [p for p in (optional_number(r, "fd_ms"), optional_number(r, "df_ms")) if p]
        if peers:
            ax.annotate(ratio_label(min(peers) / r["ours_ms"]), (r["L"], r["ours_ms"]),
                        xytext=(0, 7), textcoords="offset points", ha="center", fontsize=7.5,
                        color=OURS_COLOR, fontweight="bold",
                        bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none",
                              "alpha": 0.8})
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(lengths)
    ax.set_xticklabels([length_label(x) for x in lengths])
    ax.minorticks_off()
    ax.set_xlabel("sequence length L (tokens)")
    ax.set_ylabel("time per call (ms)")
    ax.set_title(label, fontsize=9.5)
    ax.grid(True, which="major", alpha=0.3)


def draw_mix_panel(ax, mixes, where):
    names = []
    for i, (dtype, row) in enumerate(mixes):
        fd = optional_number(row, "fd_ms")
        df = optional_number(row, "df_ms")
        bars = [(row["ours_ms"], OURS_COLOR), (fd, FD_COLOR), (df, DF_COLOR)]
        for j, (value, color) in enumerate(bars):
            if value is not None:
                ax.bar(i + (j - 1) * 0.27, value, width=0.25, color=color)
        peers = [p for p in (fd, df) if p]
        if peers:
            ax.annotate(ratio_label(min(peers) / row["ours_ms"]), (i - 0.27, row["ours_ms"]),
                        xytext=(0, 2), textcoords="offset points", ha="center", fontsize=7.5,
                        color=OURS_COLOR, fontweight="bold")
        names.append(dtype.upper())
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names)
    ax.set_ylabel("time per call (ms)")
    seqlens = mixes[0][1].get("seqlens")
    if isinstance(seqlens, list) and seqlens and all(isinstance(s, int) for s in seqlens):
        label = (f"packed MNLI-like mix\n{len(seqlens)} sequences\nof "
                 f"{min(seqlens)}-{max(seqlens)} tokens")
    else:
        label = "packed MNLI-like mix"
    ax.set_title(label, fontsize=9.5)
    ax.grid(True, axis="y", alpha=0.3)


def attention_figure(plt, results, out, written):
    name = "h200-attention.json"
    doc = load_json(results, name)
    where = shown_path(results, name)
    rows = attention_rows(doc, where)
    main = select(rows, "uniform", "bf16")
    if not main:
        raise InputError(f"{where}: no uniform BF16 rows at 12 x 64 heads")
    panels = [("bf16", main)]
    fp16 = select(rows, "uniform", "fp16")
    if fp16:
        panels.append(("fp16", fp16))
    mixes = [(d, select(rows, "mnli_mix", d)[0]) for d, _ in panels if select(rows, "mnli_mix", d)]
    widths = [1.0] * len(panels) + ([0.45] if mixes else [])
    fig, axes = plt.subplots(1, len(widths), figsize=(WIDE[0], 4.6), width_ratios=widths)
    tokens = int(main[0]["B"] * main[0]["L"])
    for ax, (dtype, panel_rows) in zip(axes, panels):
        plain = select(rows, "uniform-nopos", dtype)
        longest = panel_rows[-1]
        note = ""
        if longest["B"] * longest["L"] != tokens:
            note = f" ({int(longest['B'] * longest['L']):,} at L = {length_label(longest['L'])})"
        draw_attention_panel(ax, panel_rows, plain,
                             f"{dtype.upper()}, 12 × 64 heads\n{tokens:,} tokens per call{note}")
    if mixes:
        draw_mix_panel(axes[-1], mixes, where)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    title(fig, f"Disentangled attention forward, {doc.get('gpu', 'GPU')} "
          f"({doc.get('date', 'undated')}); labels: the faster Triton peer's time over ours", name)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    save(fig, out, "attention-by-length.png", written)
    plt.close(fig)


# Figure 2: engine against transformers, end to end.

def engine_figure(plt, results, out, written):
    name = "h200-engine.json"
    doc = load_json(results, name)
    where = shown_path(results, name)
    mnli = field(doc, "mnli_like", where)
    hf_batches = {k: float(v) for k, v in mnli.items()
                  if k.startswith("hf_batch") and k.endswith("_s") and isinstance(v, (int, float))}
    if not hf_batches:
        raise InputError(f"{where}: no mnli_like.hf_batch*_s field")
    best_key = min(hf_batches, key=hf_batches.get)
    best_batching = best_key[len("hf_"):-len("_s")].replace("batch", "batch ").replace("_", " ")
    pairs = int(number(doc, "mnli_like.pairs", where))
    workloads = [
        (f"MNLI-like set\n{pairs:,} pairs\n(transformers {best_batching})",
         number(doc, "mnli_like.ours_s", where) * 1e3, hf_batches[best_key] * 1e3),
        ("one 128-token\nsequence", number(doc, "single_128.ours_ms", where),
         number(doc, "single_128.hf_ms", where)),
        ("one 8192-token\nsequence", number(doc, "long_8192.ours_ms", where),
         number(doc, "long_8192.hf_ms", where)),
    ]
    long_32k = doc.get("long_32768")
    if isinstance(long_32k, dict) and optional_number(long_32k, "ours_ms") is not None:
        workloads.append(("one 32768-token\nsequence", long_32k["ours_ms"],
                          optional_number(long_32k, "hf_ms")))
    fig, (ax, mem) = plt.subplots(1, 2, figsize=WIDE, width_ratios=[2.6, 1.0])
    for i, (label, ours, hf) in enumerate(workloads):
        ax.bar(i - 0.2, ours, width=0.38, color=OURS_COLOR,
               label="DisentangledFlash Serve CUDA engine" if i == 0 else None)
        ax.annotate(milliseconds(ours), (i - 0.2, ours), xytext=(0, 2), textcoords="offset points",
                    ha="center", fontsize=7.5)
        if hf is None:
            ax.annotate("transformers\nnot run", (i + 0.2, ours), ha="center", va="bottom",
                        fontsize=7.5, color=HF_COLOR)
            continue
        ax.bar(i + 0.2, hf, width=0.38, color=HF_COLOR,
               label="transformers eager" if i == 0 else None)
        ax.annotate(milliseconds(hf), (i + 0.2, hf), xytext=(0, 2), textcoords="offset points",
                    ha="center", fontsize=7.5)
        ax.annotate(f"{hf / ours:.1f}× faster", (i, hf), xytext=(0, 14),
                    textcoords="offset points", ha="center", fontsize=8.5, fontweight="bold",
                    color=OURS_COLOR)
    ax.set_yscale("log")
    top = max(max(o, h or 0) for _, o, h in workloads)
    ax.set_ylim(top=top * 12)
    ax.set_xlim(-0.6, len(workloads) - 0.4)
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels([w[0] for w in workloads], fontsize=8.5)
    ax.set_ylabel("time (ms, log scale)")
    ax.set_title("end-to-end time per workload", fontsize=9.5)
    ax.legend(fontsize=8, loc="upper right", frameon=False)
    ax.grid(True, axis="y", alpha=0.3)

    ours_gib = number(doc, "long_8192.ours_peak_gib", where)
    hf_gib = number(doc, "long_8192.hf_peak_gib", where)
    mem.bar([0, 1], [ours_gib, hf_gib], color=[OURS_COLOR, HF_COLOR], width=0.6)
    for x, value in ((0, ours_gib), (1, hf_gib)):
        mem.annotate(f"{value:.2f} GiB", (x, value), xytext=(0, 2), textcoords="offset points",
                     ha="center", fontsize=8)
    mem.set_xticks([0, 1])
    mem.set_xticklabels(["engine", "transformers"], fontsize=8.5)
    mem.set_ylabel("peak GPU memory (GiB)")
    mem.set_ylim(top=hf_gib * 1.15)
    mem.set_title("one 8192-token sequence", fontsize=9.5)
    mem.grid(True, axis="y", alpha=0.3)
    model = doc.get("hf_model", {})
    shape = (f"{int(model['layers'])} layers, hidden {int(model['hidden_size'])}"
             if isinstance(model, dict) and "layers" in model and "hidden_size" in model
             else "deberta-v3-base shape")
    title(fig, f"CUDA engine vs transformers, {doc.get('gpu', 'GPU')} ({doc.get('date', 'undated')}"
          f"), {str(doc.get('dtype', '')).upper()}, random weights, {shape}", name)
    fig.tight_layout()
    save(fig, out, "engine-vs-transformers.png", written)
    plt.close(fig)


# Figure 3: served latency by request rate.

def report_point(report, where):
    """(rate, p50, p99, tag) of a dflash-loadtest report."""
    mode = field(report, "config.mode", where)
    if mode == "closed":
        rate = number(report, "measured.ok_rate_per_s", where)
        tag = f"c{int(number(report, 'config.concurrency', where))}"
    else:
        rate = number(report, "measured.offered_rate_per_s", where)
        tag = mode
    return (rate, number(report, "latency_ms.p50", where), number(report, "latency_ms.p99", where),
            tag)


def workload_name(report, where):
    return os.path.splitext(os.path.basename(str(field(report, "config.workload", where))))[0]


def new_series(joined=False):
    return {"points": [], "joined": joined}


def latency_series(results):
    """({panel: {series name: {"points": [(rate, p50, p99, tag)], "joined": bool}}}, files)."""
    panels = {MODEL_PANEL: {}, NULL_PANEL: {}, GPU_PANEL: {}}
    files = []
    for path in sorted(glob.glob(os.path.join(results, "loadtest-*.json"))):
        name = os.path.basename(path)
        source = name[len("loadtest-"):].split("-")[0]
        report = load_json(results, name)
        where = shown_path(results, name)
        default_panel = GPU_PANEL if source.startswith("h200") else MODEL_PANEL
        panel, label = SOURCES.get(source, (default_panel, source))
        series = f"{label}, {workload_name(report, where)}"
        panels[panel].setdefault(series, new_series())["points"].append(report_point(report, where))
        files.append("loadtest-*")

    soak = load_json(results, "soak-cpu-2core.json", required=False)
    if soak is not None:
        where = shown_path(results, "soak-cpu-2core.json")
        rate = number(soak, "offered_calls_per_s", where)
        windows = field(soak, "windows", where)
        if not isinstance(windows, list):
            raise InputError(f"{where}: windows is not a list")
        series = panels[MODEL_PANEL].setdefault(
            f"soak, mnli_mix: {len(windows)} one-minute windows", new_series())
        for i, w in enumerate(windows):
            at = f"{where}: windows[{i}]"
            series["points"].append((rate, number(w, "p50_ms", at), number(w, "p99_ms", at), None))
        files.append("soak-cpu-2core.json")

    name = "overload-deadlines.json"
    overload = load_json(results, name)
    where = shown_path(results, name)
    runs = field(overload, "runs", where)
    if not isinstance(runs, list):
        raise InputError(f"{where}: runs is not a list")
    for i, run in enumerate(runs):
        at = f"{where}: runs[{i}]"
        # Only the runs on the machine of the other CPU results share their panel.
        if not str(field(run, "machine", at)).startswith("2-core"):
            continue
        this = field(run, "this", at)
        point = (number(this, "offered_per_s", f"{at}.this"), optional_number(this, "ok_p50_ms"),
                 number(this, "ok_p99_ms", f"{at}.this"), "2× overload" if i == 0 else None)
        panels[MODEL_PANEL].setdefault("2× overload, 5 s deadlines: OK answers",
                                       new_series())["points"].append(point)
    files.append(name)

    serving = load_json(results, "h200-serving.json", required=False)
    if serving is not None:
        where = shown_path(results, "h200-serving.json")
        servers = field(serving, "servers", where)
        if not isinstance(servers, dict):
            raise InputError(f"{where}: servers is not an object")
        for label, server in servers.items():
            rows = field(server, "poisson", f"{where}: servers.{label}")
            if not isinstance(rows, list):
                raise InputError(f"{where}: servers.{label}.poisson is not a list")
            series = panels[GPU_PANEL].setdefault(f"Poisson sweep, mnli_mix: {label} server",
                                                  new_series(joined=True))
            for i, row in enumerate(rows):
                at = f"{where}: servers.{label}.poisson[{i}]"
                series["points"].append((number(row, "rate", at), number(row, "p50_ms", at),
                                         number(row, "p99_ms", at), None))
        files.append("h200-serving.json")
    return panels, sorted(set(files))


def draw_latency_panel(ax, series, colors, markers):
    from matplotlib import ticker

    for k, (name, entry) in enumerate(sorted(series.items())):
        color = colors[k % len(colors)]
        marker = markers[k % len(markers)]
        points = sorted(entry["points"], key=lambda p: (p[0], p[2]))
        for rate, p50, p99, _ in points:
            if p50 is not None:
                ax.plot([rate, rate], [p50, p99], "-", color=color, lw=1.0, alpha=0.6)
        with_p50 = [(p[0], p[1]) for p in points if p[1] is not None]
        if with_p50:
            ax.plot(*zip(*with_p50), marker=marker, ls="-" if entry["joined"] else "none",
                    color=color, markersize=5, label=name)
        ax.plot([p[0] for p in points], [p[2] for p in points], marker=marker,
                ls="--" if entry["joined"] else "none", color=color, markersize=5,
                markerfacecolor="white", label=None if with_p50 else name)
        # Tags of alternate series above p99 and below p50, so that neighbours stay apart.
        for rate, p50, p99, tag in points:
            # A joined sweep reads as one curve; the legend names it.
            if not tag or entry["joined"]:
                continue
            if k % 2 == 0 or p50 is None:
                ax.annotate(tag, (rate, p99), xytext=(4, 3), textcoords="offset points",
                            fontsize=7, color=color)
            else:
                ax.annotate(tag, (rate, p50), xytext=(4, -9), textcoords="offset points",
                            fontsize=7, color=color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:,g}"))
    ax.set_xlabel("calls/s")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", frameon=False)


def latency_figure(plt, results, out, written):
    panels, files = latency_series(results)
    shown = [(p, panels[p]) for p in (MODEL_PANEL, NULL_PANEL, GPU_PANEL) if panels[p]]
    if not shown:
        raise InputError(f"{shown_path(results, '')}: no load-generator results to draw")
    widths = [1.3 if p == MODEL_PANEL else 0.8 if p == NULL_PANEL else 1.2 for p, _ in shown]
    fig, axes = plt.subplots(1, len(shown), figsize=(WIDE[0], 4.9), squeeze=False,
                             width_ratios=widths)
    colors = [OURS_COLOR, FD_COLOR, DF_COLOR, "#8e44ad", "#d68910", SDPA_COLOR]
    markers = ["o", "s", "D", "^", "v", "P"]
    for ax, (panel, series) in zip(axes[0], shown):
        draw_latency_panel(ax, series, colors, markers)
        ax.set_title(PANEL_TITLES[panel], fontsize=9)
        low, high = ax.get_xlim()
        low, high = low / 1.3, high * 1.3
        ax.set_xlim(low, high)
        # Round-number ticks: 1-2-5 per decade, 1-2-3-5 where the axis spans less than one.
        steps = (1, 2, 3, 5) if high / low < 10 else (1, 2, 5)
        ax.set_xticks([step * 10**e for e in range(-1, 7) for step in steps
                       if low <= step * 10**e <= high])
        low, high = ax.get_ylim()
        # Room above the points for the legend and below them for tags.
        ax.set_ylim(low / 1.5, high * (15 if panel == MODEL_PANEL else 12))
        if panel == MODEL_PANEL:
            ax.axhline(5000, color=SDPA_COLOR, ls=":", lw=1.0)
            ax.annotate("5 s client deadline", (ax.get_xlim()[0], 5000), xytext=(4, -10),
                        textcoords="offset points", fontsize=7, color=SDPA_COLOR)
    axes[0][0].set_ylabel("latency (ms): filled p50, open p99")
    fig.suptitle("Served latency by request rate (dflash-loadtest over loopback gRPC; open loop: "
                 "offered rate, closed loop cN: answered rate)\nsource: bench/results/ "
                 + ", ".join(files), fontsize=10)
    fig.tight_layout()
    save(fig, out, "served-latency.png", written)
    plt.close(fig)


# Figure 4: goodput under overload, this build against the earlier one.

def build_hash(text):
    return str(text).split(" ")[0]


def overload_figure(plt, results, out, written):
    name = "overload-deadlines.json"
    doc = load_json(results, name)
    where = shown_path(results, name)
    runs = field(doc, "runs", where)
    if not isinstance(runs, list) or not runs:
        raise InputError(f"{where}: runs is empty or not a list")
    fig, (ok_ax, count_ax) = plt.subplots(1, 2, figsize=(WIDE[0], 4.9))
    labels = []
    notes = {}
    for i, run in enumerate(runs):
        at = f"{where}: runs[{i}]"
        capacity = number(run, "capacity_per_s", at)
        offered = number(run, "this.offered_per_s", at)
        this_ok = number(run, "this.ok_per_s", at)
        earlier_ok = number(run, "earlier.ok_per_s", at)
        ok_ax.bar(i - 0.2, this_ok, width=0.38, color=OURS_COLOR,
                  label="this build" if i == 0 else None)
        ok_ax.bar(i + 0.2, earlier_ok, width=0.38, color=EARLIER_COLOR,
                  label="earlier build" if i == 0 else None)
        ok_ax.plot([i - 0.42, i + 0.42], [capacity, capacity], color="black", lw=1.2,
                   label="closed-loop capacity" if i == 0 else None)
        ok_ax.annotate(f"offered {offered:.0f}/s", (i, capacity), xytext=(0, 4),
                       textcoords="offset points", ha="center", fontsize=7.5)
        for x, value in ((i - 0.2, this_ok), (i + 0.2, earlier_ok)):
            ok_ax.annotate(f"{value:.0f}", (x, value), xytext=(0, -10),
                           textcoords="offset points", ha="center", fontsize=7.5, color="white")

        for j, (key, color) in enumerate((("this", OURS_COLOR), ("earlier", EARLIER_COLOR))):
            clients = number(run, f"{key}.ok", at)
            server = number(run, f"{key}.server_counted_ok", at)
            x = i + (j - 0.5) * 0.42
            count_ax.bar(x - 0.1, server, width=0.19, color=color, alpha=0.45,
                         label=f"{key} build: server's OK count" if i == 0 else None)
            count_ax.bar(x + 0.1, clients, width=0.19, color=color,
                         label=f"{key} build: OK answers received" if i == 0 else None)
        machine = str(field(run, "machine", at)).split(",")[0].split(" (")[0].split(" of ")[0]
        builds = [str(field(run, f"builds.{key}", at)) for key in ("this", "earlier")]
        for build in builds:
            if " " in build:
                notes[build_hash(build)] = build.partition(" ")[2].strip("()")
        labels.append(f"{machine}\n{build_hash(builds[0])}\nvs {build_hash(builds[1])}")
    for ax in (ok_ax, count_ax):
        ax.set_xticks(range(len(runs)))
        ax.set_xticklabels(labels, fontsize=7.5)
        ax.grid(True, axis="y", alpha=0.3)
    ok_ax.set_ylabel("OK answers received per second")
    ok_ax.set_title("goodput at 2× the closed-loop capacity", fontsize=9.5)
    ok_ax.set_ylim(top=ok_ax.get_ylim()[1] * 1.3)
    ok_ax.legend(fontsize=7.5, loc="upper center", frameon=False, ncol=3)
    count_ax.set_ylabel("OK answers in the run")
    count_ax.set_title("OK answers: counted by the server, received by the clients", fontsize=9.5)
    count_ax.set_ylim(top=count_ax.get_ylim()[1] * 1.35)
    count_ax.legend(fontsize=7, loc="upper center", frameon=False, ncol=2)
    if notes:
        fig.text(0.5, 0.01, "; ".join(f"{h}: {n}" for h, n in sorted(notes.items())),
                 ha="center", fontsize=7.5, wrap=True)
    title(fig, "Overload with 5 s client deadlines (demo model, CPU engine, MNLI-like mix, "
          "Poisson arrivals)", name)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    save(fig, out, "overload-goodput.png", written)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=os.path.join(REPO, "bench", "results"),
                        help="folder of the results files (default: the repository's)")
    parser.add_argument("--out", default=os.path.join(REPO, "docs", "figures"),
                        help="folder the PNG files go to (default: docs/figures)")
    args = parser.parse_args()
    try:
        import matplotlib
    except ImportError:
        sys.exit("make_figures.py: matplotlib is not installed (pip install matplotlib)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Fonts shipped with matplotlib and fixed styles: the same bytes on every machine with the
    # same matplotlib version.
    matplotlib.rcParams.update(matplotlib.rcParamsDefault)
    matplotlib.rcParams.update({"font.family": "DejaVu Sans", "font.size": 9,
                                "axes.titlesize": 9.5, "savefig.dpi": DPI,
                                "svg.hashsalt": "dflash"})
    os.makedirs(args.out, exist_ok=True)
    written = []
    try:
        for draw in (attention_figure, engine_figure, latency_figure, overload_figure):
            draw(plt, args.results, args.out, written)
    except InputError as e:
        sys.exit(f"make_figures.py: {e}")
    for path in written:
        print(f"wrote {os.path.relpath(path)} ({os.path.getsize(path):,} bytes)")


if __name__ == "__main__":
    main()
