#!/usr/bin/env python3
"""Soak benchmark: dflash-server under steady open-loop load for many minutes.

Starts dflash-server on 127.0.0.1 (the demo model unless --config is given), measures its capacity
on the workload with a short closed-loop run, then offers a Poisson load of --fraction of that
capacity for --minutes, one dflash-loadtest run per window. Meanwhile it samples the server's
resident memory. It reports, per window and in total:

- the server's RSS over time (start, end, peak, growth after the first window);
- errors by code, and the latency percentiles of every window (p99 drift: last window's p99
  over the first's);
- counter agreement: the server's dflash_requests_total by code against what the clients
  received (every call the load generator sent, warm-up and capacity run included).

Not a test (nothing here asserts): a run writes its JSON report and prints a summary. Loopback
only, bounded by --minutes.

Usage:
  bench/soak_server.py --minutes=10 --fraction=0.7                # demo model, CPU engine
  bench/soak_server.py --build=build --backend=null --minutes=30 --report=/tmp/soak.json
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
    )
    parser.add_argument("--build", default="build", help="build directory (default: build)")
    parser.add_argument("--config", default="config/server.yaml", help="server configuration")
    parser.add_argument("--backend", default="cpu", help="backend override: cpu, cuda, null, auto")
    parser.add_argument("--workload", default="loadtest/workloads/mnli_mix.json")
    parser.add_argument("--minutes", type=float, default=10.0, help="soak length (default 10)")
    parser.add_argument("--window", type=float, default=60.0, help="seconds per window (60)")
    parser.add_argument("--fraction", type=float, default=0.7,
                        help="offered load as a fraction of the measured capacity (0.7)")
    parser.add_argument("--capacity_seconds", type=float, default=20.0,
                        help="closed-loop run that measures the capacity (20)")
    parser.add_argument("--concurrency", type=int, default=32,
                        help="closed-loop concurrency of the capacity run (32)")
    parser.add_argument("--timeout", default="5s", help="each call's deadline (5s)")
    parser.add_argument("--port", type=int, default=50171)
    parser.add_argument("--metrics_port", type=int, default=50172)
    parser.add_argument("--report", default="bench/results/soak.json", help="JSON report path")
    args = parser.parse_args()
    if not 0 < args.fraction <= 2:
        parser.error("--fraction must be in (0, 2]")
    if args.minutes <= 0 or args.window <= 0:
        parser.error("--minutes and --window must be positive")
    return args


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def scrape_requests(metrics_port):
    """dflash_requests_total summed by code."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    by_code = {}
    for line in text.splitlines():
        if not line.startswith("dflash_requests_total{"):
            continue
        labels, value = line.rsplit(" ", 1)
        code = labels.split('code="', 1)[1].split('"', 1)[0]
        by_code[code] = by_code.get(code, 0) + float(value)
    return by_code


class RssSampler(threading.Thread):
    def __init__(self, pid, interval=2.0):
        super().__init__(daemon=True)
        self.pid, self.interval, self.samples = pid, interval, []
        self.stop = threading.Event()
        self.start_time = time.monotonic()

    def run(self):
        while not self.stop.is_set():
            try:
                self.samples.append((round(time.monotonic() - self.start_time, 1),
                                     rss_bytes(self.pid)))
            except OSError:
                return
            self.stop.wait(self.interval)


def loadtest(args, name, extra, workdir):
    report = os.path.join(workdir, f"{name}.json")
    command = [os.path.join(args.build, "bin", "dflash-loadtest"),
               f"--target=127.0.0.1:{args.port}", f"--workload={args.workload}",
               f"--timeout={args.timeout}", f"--report={report}", "--progress=0"] + extra
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"soak: dflash-loadtest failed ({result.returncode}):\n{result.stderr}")
    with open(report) as file:
        return json.load(file)


def client_codes(run):
    """What the clients received in one run, warm-up included, by code name."""
    codes = {"OK": run["warmup"]["ok"] + run["measured"]["ok"]}
    for code, count in run["measured"].get("errors_by_code", {}).items():
        codes[code] = codes.get(code, 0) + count
    warmup_errors = run["warmup"]["errors"]
    if warmup_errors:
        codes["(warm-up errors)"] = codes.get("(warm-up errors)", 0) + warmup_errors
    return codes


def main():
    args = parse_args()
    os.chdir(REPO)
    workdir = tempfile.mkdtemp(prefix="dflash-soak-")
    model_dir = os.path.abspath(os.path.join(args.build, "demo-model"))
    server_log = open(os.path.join(workdir, "server.log"), "w")
    server = subprocess.Popen(
        [os.path.join(args.build, "bin", "dflash-server"), f"--config={args.config}",
         f"--set=models.demo.path={model_dir}", f"--listen=127.0.0.1:{args.port}",
         f"--metrics_listen=127.0.0.1:{args.metrics_port}", f"--backend={args.backend}"],
        stdout=server_log, stderr=subprocess.STDOUT)
    try:
        for _ in range(480):
            probe = subprocess.run([os.path.join(args.build, "bin", "dflash-cli"),
                                    f"--target=127.0.0.1:{args.port}", "health"],
                                   capture_output=True)
            if probe.returncode == 0:
                break
            if server.poll() is not None:
                sys.exit(f"soak: the server exited; log: {server_log.name}")
            time.sleep(0.5)
        else:
            sys.exit(f"soak: the server did not become healthy; log: {server_log.name}")

        sampler = RssSampler(server.pid)
        sampler.start()
        received = {}

        def add(codes):
            for code, count in codes.items():
                received[code] = received.get(code, 0) + count

        print(f"soak: measuring capacity ({args.capacity_seconds:.0f} s closed loop, "
              f"concurrency {args.concurrency})", file=sys.stderr)
        # A long deadline: the server refuses at once what it cannot finish by the deadline, and
        # a closed loop would then measure how fast it refuses instead of how fast it computes.
        capacity_run = loadtest(args, "capacity", [
            "--mode=closed", f"--concurrency={args.concurrency}", "--channels=4",
            f"--duration={args.capacity_seconds}s", "--warmup=3s", "--timeout=120s"], workdir)
        add(client_codes(capacity_run))
        capacity = capacity_run["measured"]["ok_rate_per_s"]
        rate = max(0.1, args.fraction * capacity)
        print(f"soak: capacity {capacity:.1f} calls/s; offering {rate:.1f} calls/s "
              f"for {args.minutes:g} min", file=sys.stderr)

        windows = []
        deadline = time.monotonic() + args.minutes * 60
        while time.monotonic() < deadline - 1:
            seconds = min(args.window, deadline - time.monotonic())
            run = loadtest(args, f"window{len(windows)}", [
                "--mode=poisson", f"--rate={rate}", f"--duration={seconds:.1f}s", "--warmup=0s",
                "--channels=4"], workdir)
            add(client_codes(run))
            latency = run["latency_ms"]
            window = {
                "index": len(windows),
                "seconds": round(seconds, 1),
                "sent": run["measured"]["sent"],
                "ok": run["measured"]["ok"],
                "errors": run["measured"]["errors"],
                "errors_by_code": run["measured"].get("errors_by_code", {}),
                "p50_ms": latency.get("p50"), "p99_ms": latency.get("p99"),
                "max_ms": latency.get("max"),
                "send_lag_p99_ms": run.get("send_lag_ms", {}).get("p99"),
                "rss_mib": round(rss_bytes(server.pid) / 2**20, 1),
            }
            windows.append(window)
            print(f"soak: window {window['index']}: ok {window['ok']}, errors {window['errors']}, "
                  f"p50 {window['p50_ms']} ms, p99 {window['p99_ms']} ms, "
                  f"RSS {window['rss_mib']} MiB", file=sys.stderr)
        time.sleep(1)  # Let the last answers reach the counters.
        counted = scrape_requests(args.metrics_port)
        sampler.stop.set()
        sampler.join()
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()

    rss = [value for _, value in sampler.samples]
    first_window_rss = windows[0]["rss_mib"] if windows else None
    counted_total = sum(counted.values())
    received_total = sum(received.values())
    report = {
        "tool": "bench/soak_server.py",
        "command": " ".join([sys.argv[0]] + sys.argv[1:]),
        "backend": args.backend,
        "workload": args.workload,
        "capacity_calls_per_s": capacity,
        "offered_calls_per_s": rate,
        "minutes": args.minutes,
        "windows": windows,
        "rss_mib": {
            "start": round(rss[0] / 2**20, 1) if rss else None,
            "end": round(rss[-1] / 2**20, 1) if rss else None,
            "peak": round(max(rss) / 2**20, 1) if rss else None,
            "growth_after_first_window": (round(windows[-1]["rss_mib"] - first_window_rss, 1)
                                          if windows else None),
            "samples": [[t, round(v / 2**20, 1)] for t, v in sampler.samples],
        },
        "p99_drift": (round(windows[-1]["p99_ms"] / windows[0]["p99_ms"], 3)
                      if len(windows) > 1 and windows[0]["p99_ms"] else None),
        "errors": sum(w["errors"] for w in windows),
        "counters": {
            "server_by_code": counted,
            "clients_by_code": received,
            "server_total": counted_total,
            "clients_total": received_total,
            "agree": counted.get("OK", 0) == received.get("OK", 0)
                     and counted_total == received_total,
        },
        "server_exit_code": server.returncode,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.report)), exist_ok=True)
    with open(args.report, "w") as file:
        json.dump(report, file, indent=1)
        file.write("\n")
    print(json.dumps({k: v for k, v in report.items() if k not in ("windows", "rss_mib")},
                     indent=1))
    print(f"RSS MiB: start {report['rss_mib']['start']}, end {report['rss_mib']['end']}, "
          f"peak {report['rss_mib']['peak']}; report: {args.report}")


if __name__ == "__main__":
    main()
