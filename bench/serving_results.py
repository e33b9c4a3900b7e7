#!/usr/bin/env python3
"""Joins the reports of bench/serving_on_gpu.sh into its results of record.

    python3 bench/serving_results.py --dir OUT --gpu NAME --server-cores 0-11 --load-cores 12-15 \
        --command "..."

Writes DIR/<gpu>-serving.json (per server binary: the engine's offline tokens/s, the concurrency-1
p50, closed-loop throughput, the Poisson sweep and the highest rate whose p99 <= 50 ms with no
errors and the schedule kept, with served_over_engine and the server's CPU microseconds per call)
and DIR/<gpu>-protocols.json (the MNLI mix through dflash.v1, HTTP and KServe at one load), where
<gpu> is h200, h100 or gpu after the --gpu name. The engine's offline tokens/s is its best over the
batch budgets dflash-bench-engine timed.
"""
import argparse
import datetime
import glob
import json
import os
import re

import thread_cpu

P99_LIMIT_MS = 50.0


def read_json(path):
    with open(path) as f:
        return json.load(f)


def calls_in_run(report):
    """Every call a load run made, its warm-up's included: the server's CPU covers them all."""
    return report["warmup"]["ok"] + report["warmup"]["errors"] + report["measured"]["completed"]


def cpu_us_per_call(report_path, report):
    """The server's CPU time over a run (utime + stime) per call answered in it, warm-up included."""
    cpu_path = report_path[: -len(".json")] + ".cpu"
    if not os.path.exists(cpu_path):
        return None
    before, after, ticks_per_s = (float(v) for v in open(cpu_path).read().split())
    calls = calls_in_run(report)
    return round((after - before) / ticks_per_s * 1e6 / calls, 1) if calls else None


def thread_figures(report_path, report):
    """Per-thread CPU per call and the busiest thread over the run (thread_cpu.py), if recorded."""
    prefix = report_path[: -len(".json")] + ".threads-"
    if not all(os.path.exists(prefix + part) for part in ("before", "after", "wall")):
        return {}
    wall = float(open(prefix + "wall").read())
    figures = thread_cpu.summary(thread_cpu.read(prefix + "before"),
                                 thread_cpu.read(prefix + "after"), wall, calls_in_run(report),
                                 thread_cpu.CLOCK_TICKS_PER_SECOND)
    figures.pop("server_cpu_us_per_call")  # The process total is cpu_us_per_call's.
    return figures


def read_batch_metrics(path):
    """{(name, stage or None): value} of the dflash_batch_* lines serving_on_gpu.sh saved."""
    values = {}
    for line in open(path):
        match = re.match(r'(\w+)\{([^}]*)\}\s+(\S+)', line)
        if not match:
            continue
        stage = re.search(r'stage="(\w+)"', match.group(2))
        values[(match.group(1), stage.group(1) if stage else None)] = float(match.group(3))
    return values


def batch_figures(report_path):
    """The engine's batches over a run, from the server's counters before and after it: their
    count and mean tokens, the share of the run's wall time the engine ran (`run`) and the GPU was
    busy (`device`, CUDA engines), and the host's part of each run (run - device) per batch."""
    prefix = report_path[: -len(".json")]
    paths = [prefix + ".metrics-before", prefix + ".metrics-after", prefix + ".threads-wall"]
    if not all(os.path.exists(p) for p in paths):
        return {}
    before, after = read_batch_metrics(paths[0]), read_batch_metrics(paths[1])
    wall = float(open(paths[2]).read())

    def delta(name, stage=None):
        return after.get((name, stage), 0.0) - before.get((name, stage), 0.0)

    batches = delta("dflash_batch_tokens_count")
    if batches <= 0 or wall <= 0:
        return {}
    run = delta("dflash_batch_stage_seconds_sum", "run")
    device = delta("dflash_batch_stage_seconds_sum", "device")
    figures = {
        "batches_per_s": round(batches / wall, 1),
        "mean_batch_tokens": round(delta("dflash_batch_tokens_sum") / batches),
        "engine_run_busy_fraction": round(run / wall, 3),
    }
    if delta("dflash_batch_stage_seconds_count", "device") > 0:
        figures["gpu_busy_fraction"] = round(device / wall, 3)
        figures["host_us_per_batch_in_run"] = round((run - device) / batches * 1e6, 1)
    return figures


def row(report_path):
    report = read_json(report_path)
    measured = report["measured"]
    schedule = report.get("schedule") or {}
    return {
        "ok_per_s": round(measured["ok_rate_per_s"], 1),
        "server_tokens_per_s": round(measured["server_tokens_per_s"]),
        "p50_ms": report["latency_ms"]["p50"],
        "p99_ms": report["latency_ms"]["p99"],
        "errors": measured["errors"],
        "errors_by_code": measured["errors_by_code"],
        "schedule_kept": schedule.get("kept"),
        "schedule_cause": schedule.get("cause"),
        "send_lag_p99_ms": schedule.get("send_lag_p99_ms"),
        "senders": report["config"].get("senders"),
        "server_cpu_us_per_call": cpu_us_per_call(report_path, report),
        **thread_figures(report_path, report),
        **batch_figures(report_path),
    }


def engine_tokens_per_s(directory):
    path = os.path.join(directory, "engine.json")
    if not os.path.exists(path):
        return None
    return round(max(read_json(path)["tokens_per_s"].values()))


def file_prefix(gpu):
    for name in ("H200", "H100"):
        if name in gpu:
            return name.lower()
    return "gpu"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--gpu", required=True)
    parser.add_argument("--server-cores", required=True)
    parser.add_argument("--load-cores", required=True)
    parser.add_argument("--command", required=True)
    args = parser.parse_args()

    engine = engine_tokens_per_s(args.dir)
    labels = sorted({re.sub(r"-(c\d+|poisson-\d+|proto-\w+)\.json$", "", os.path.basename(p))
                     for p in glob.glob(os.path.join(args.dir, "*-*.json"))
                     if re.search(r"-(c\d+|poisson-\d+|proto-\w+)\.json$", p)})
    common = {"gpu": args.gpu, "date": datetime.date.today().isoformat(), "command": args.command,
              "model": "v3-base-shaped random weights (bench/engine/make_random_models.py)",
              "dtype": "float16", "workload": "loadtest/workloads/mnli_mix.json",
              "server_cores": args.server_cores, "load_generator_cores": args.load_cores}
    serving = dict(common, engine_offline_tokens_per_s=engine, servers={})
    protocols = dict(common, load="closed loop, concurrency 256", servers={})
    for label in labels:
        path = lambda name: os.path.join(args.dir, f"{label}-{name}.json")  # noqa: E731
        entry = {}
        if os.path.exists(path("c1")):
            entry["c1_p50_ms"] = read_json(path("c1"))["latency_ms"]["p50"]
            entry["c1"] = row(path("c1"))
        entry["closed"] = {c: row(path(f"c{c}")) for c in (256, 512)
                           if os.path.exists(path(f"c{c}"))}
        sweep = sorted((int(re.search(r"poisson-(\d+)", p).group(1)), p)
                       for p in glob.glob(path("poisson-*")))
        entry["poisson"] = [dict(rate=rate, **row(p)) for rate, p in sweep]
        held = [r for r in entry["poisson"] if r["p99_ms"] <= P99_LIMIT_MS and r["errors"] == 0
                and r["schedule_kept"]]
        if held:
            best = max(held, key=lambda r: r["rate"])
            entry["best_rate_p99_under_50ms"] = best
            if engine:
                entry["served_over_engine"] = round(best["server_tokens_per_s"] / engine, 3)
        cpu = [r["server_cpu_us_per_call"] for r in entry["poisson"] + list(entry["closed"].values())
               if r["server_cpu_us_per_call"]]
        if cpu:
            entry["server_cpu_us_per_call_median"] = sorted(cpu)[len(cpu) // 2]
        if entry["closed"] or entry["poisson"]:
            serving["servers"][label] = entry
        proto = {name: row(path(f"proto-{name}")) for name in ("dflash", "http", "kserve")
                 if os.path.exists(path(f"proto-{name}"))}
        if proto:
            if "dflash" in proto:
                for name in ("http", "kserve"):
                    if name in proto and proto["dflash"]["ok_per_s"]:
                        proto[name]["over_dflash"] = round(
                            proto[name]["ok_per_s"] / proto["dflash"]["ok_per_s"], 3)
            protocols["servers"][label] = proto
    prefix = file_prefix(args.gpu)
    for kind, result in (("serving", serving), ("protocols", protocols)):
        name = f"{prefix}-{kind}.json"
        if result["servers"] or (kind == "serving" and engine):
            with open(os.path.join(args.dir, name), "w") as f:
                json.dump(result, f, indent=2)
                f.write("\n")
            print(json.dumps(result, indent=1)[:3000])


if __name__ == "__main__":
    main()
