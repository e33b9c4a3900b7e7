#!/usr/bin/python3
"""The observability files against the real thing: a dflash-server, the real Prometheus, real load.

Starts dflash-server (null engine: the service without a model, two models "demo" and "slow") from
the runtime folder that scripts/collect-runtime.sh makes for the Docker images, waits for it with
the images' HEALTHCHECK command, starts Debian's Prometheus on loopback with
deploy/observability/prometheus.yml (its Kubernetes discovery replaced by a static target that
carries the same __meta_kubernetes_* labels, so the shipped relabelling runs) and its rule files,
drives the server with dflash-loadtest (normal traffic on "demo"; on "slow", calls whose deadline
passes while they wait for a batch, and inputs over max_input_length: errors, drops and
truncations), then asks Prometheus over its HTTP API for:
  - every metric named by the dashboard, the recording rules and the prometheus-adapter rules;
  - every recording rule;
  - every Grafana panel query (as a range query, Grafana's variables filled as "All");
  - both prometheus-adapter metricsQuery templates, filled as the adapter fills them for a pod.
Each must evaluate without error and return data. Device memory comes from a third model on the
CPU engine (the host's memory; the null engine has none); dflash_engine_errors_total exists at 0
from the start.
Finally the server gets SIGTERM and must drain and exit 0.

Usage: deploy/tests/prometheus_test.py --runtime=DIR --build=DIR [--load_seconds=8]
  --runtime  folder made by scripts/collect-runtime.sh (bin/dflash-server, bin/dflash-cli, lib/)
  --build    build tree with bin/dflash-loadtest and demo-model/
Exit status 0 when every check passed; the last line reads "N passed, N failed".
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OBS = os.path.join(ROOT, "deploy", "observability")
DASHBOARD = os.path.join(OBS, "grafana", "dflash-dashboard.json")
ADAPTER = os.path.join(ROOT, "deploy", "k8s", "prometheus-adapter", "values.yaml")
# The labels Prometheus' kubernetes_sd gives a pod target, as the shipped relabelling reads them.
POD_META = {
    "__meta_kubernetes_pod_label_app_kubernetes_io_name": "dflash-serve",
    "__meta_kubernetes_pod_annotation_prometheus_io_scrape": "true",
    "__meta_kubernetes_pod_annotation_prometheus_io_path": "/metrics",
    "__meta_kubernetes_namespace": "ci",
    "__meta_kubernetes_pod_name": "dflash-ci-0",
    "__meta_kubernetes_pod_node_name": "ci-node",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


def wait_for(what, check, seconds, proc):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what}: process exited with {proc.returncode} while starting")
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{what}: not ready after {seconds} s")


class Prometheus:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}/api/v1/"

    def call(self, endpoint, **params):
        url = self.base + endpoint + "?" + urllib.parse.urlencode(params)
        try:
            body = json.loads(http_get(url))
        except urllib.error.HTTPError as error:  # 400/422: the query does not parse or evaluate.
            body = json.loads(error.read().decode())
        if body.get("status") != "success":
            raise ValueError(f"{body.get('errorType')}: {body.get('error')}")
        return body["data"]["result"]

    def instant(self, query):
        return self.call("query", query=query)

    def range(self, query, seconds):
        now = time.time()
        return self.call("query_range", query=query, start=now - seconds, end=now, step="1s")


def metric_names(expr, recorded):
    """dflash_* metrics an expression reads, directly or through recording rules."""
    names = set()
    for name in re.findall(r"[a-z_]+:[a-z0-9_:]+|dflash_[a-z_]+", expr):
        if name in recorded:
            names |= metric_names(recorded[name], recorded)
        else:
            names.add(re.sub(r"_(bucket|sum|count)$", "", name) if name.startswith("dflash_") and
                      not name.endswith("_total") else name)
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runtime", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("--load_seconds", type=int, default=8)
    parser.add_argument("--prometheus", default="/usr/bin/prometheus")
    args = parser.parse_args()
    runtime, build = os.path.abspath(args.runtime), os.path.abspath(args.build)
    grpc_port, metrics_port, prom_port = free_port(), free_port(), free_port()
    work = tempfile.mkdtemp(prefix="dflash-prometheus-test-")
    procs = []
    passed, failed = [], []

    def check(name, ok, detail=""):
        (passed if ok else failed).append(name)
        print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)

    def start(name, argv, env=None):
        log = open(os.path.join(work, name + ".log"), "w")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        procs.append((name, proc))
        return proc

    try:
        # The server as the images run it: the container configuration, the collected runtime.
        demo = os.path.join(build, "demo-model")
        overrides = ",".join([
            f"models.0.name=demo,models.0.path={demo}",
            f"models.1.name=slow,models.1.path={demo}",
            # The null engine computes nothing, fast: the load. The CPU engine model exports the
            # host's memory as its device memory for the memory panels and rules.
            "models.0.backend=null,models.1.backend=null",
            f"models.2.name=host,models.2.path={demo},models.2.backend=cpu",
            # Waits up to 300 ms for a fuller batch: calls with a 100 ms deadline expire queued.
            "models.1.batching.max_queue_delay=300ms",
            "models.1.max_input_length=16",
        ])
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(runtime, "lib"))
        server = start("dflash-server", [
            os.path.join(runtime, "bin", "dflash-server"),
            f"--config={ROOT}/deploy/k8s/base/server.yaml", f"--set={overrides}",
            f"--listen=127.0.0.1:{grpc_port}", f"--metrics_listen=127.0.0.1:{metrics_port}"],
            env)
        health = [os.path.join(runtime, "bin", "dflash-cli"), f"--target=127.0.0.1:{grpc_port}",
                  "--timeout=4s", "health"]
        wait_for("dflash-server", lambda: subprocess.run(
            health, env=env, capture_output=True).returncode == 0, 60, server)
        check("server healthy through the image's HEALTHCHECK command", True)

        # The shipped Prometheus configuration with a static target in place of pod discovery.
        config = yaml.safe_load(open(os.path.join(OBS, "prometheus.yml")))
        config["global"].update(scrape_interval="1s", evaluation_interval="1s")
        config["rule_files"] = [os.path.join(OBS, f) for f in config["rule_files"]]
        job = next(j for j in config["scrape_configs"] if j["job_name"] == "dflash")
        del job["kubernetes_sd_configs"]
        job["static_configs"] = [{
            "targets": [f"127.0.0.1:{metrics_port}"],
            "labels": dict(POD_META, __meta_kubernetes_pod_annotation_prometheus_io_port=str(
                metrics_port))}]
        config_file = os.path.join(work, "prometheus.yml")
        with open(config_file, "w") as f:
            yaml.safe_dump(config, f)
        promtool = subprocess.run(["promtool", "check", "config", config_file],
                                  capture_output=True, text=True)
        check("promtool check config (shipped prometheus.yml, static target)",
              promtool.returncode == 0, promtool.stdout + promtool.stderr)
        prometheus = start("prometheus", [
            args.prometheus, f"--config.file={config_file}",
            f"--storage.tsdb.path={os.path.join(work, 'tsdb')}",
            f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"])
        wait_for("prometheus", lambda: "Ready" in http_get(
            f"http://127.0.0.1:{prom_port}/-/ready"), 60, prometheus)
        prom = Prometheus(prom_port)

        # Load: normal traffic, and on "slow" expired deadlines and truncated inputs.
        loadtest = os.path.join(build, "bin", "dflash-loadtest")
        common = [f"--target=127.0.0.1:{grpc_port}", f"--duration={args.load_seconds}s",
                  "--warmup=1s", "--mode=closed",
                  f"--corpus={ROOT}/config/demo/corpus.txt",
                  f"--workload={ROOT}/loadtest/workloads/classify_64.json"]
        loads = [start("load-demo", [loadtest, *common, "--model=demo", "--concurrency=4"]),
                 start("load-slow", [loadtest, *common, "--model=slow", "--concurrency=2",
                                     "--timeout=100ms"])]
        for proc in loads:
            proc.wait(timeout=args.load_seconds + 60)
        check("dflash-loadtest runs completed", all(p.returncode == 0 for p in loads),
              str([p.returncode for p in loads]))
        time.sleep(3)  # A few more scrapes and rule evaluations after the last call.

        recording = {}
        for rule_file in config["rule_files"]:
            for group in yaml.safe_load(open(rule_file))["groups"]:
                for rule in group["rules"]:
                    if "record" in rule:
                        recording[rule["record"]] = rule["expr"]

        dashboard = json.load(open(DASHBOARD))
        panels = [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p.get("targets", [])]
        adapter = yaml.safe_load(open(ADAPTER))["rules"]["custom"]
        adapter_queries = []
        for rule in adapter:
            series = re.match(r"(\w+)", rule["seriesQuery"]).group(1)
            query = (rule["metricsQuery"].replace("<<.Series>>", series)
                     .replace("<<.LabelMatchers>>", 'namespace="ci",pod=~"dflash-ci-0"')
                     .replace("<<.GroupBy>>", "pod"))
            adapter_queries.append((rule["name"]["as"], query))

        def expect(name, expr, result):
            if result:
                check(name, True, f"{len(result)} series")
            else:
                check(name, False, f"no data: {expr}")

        def run(name, expr, query):
            try:
                expect(name, expr, query(expr))
            except ValueError as error:
                check(name, False, f"{error}: {expr}")

        all_exprs = [e for _, e in panels] + list(recording.values()) + [q for _, q in adapter_queries]
        metrics = set().union(*(metric_names(e, recording) for e in all_exprs))
        for metric in sorted(metrics):
            run(f"metric {metric}", f'{{__name__=~"{metric}(_bucket|_sum|_count)?"}}', prom.instant)
        for record, expr in recording.items():
            run(f"recording rule {record}", record, prom.instant)
        for title, expr in panels:
            filled = (expr.replace("$__rate_interval", "1m").replace('"$model"', '".+"')
                      .replace('"$instance"', '".+"'))
            run(f"panel '{title}': {expr[:60]}", filled,
                lambda e: prom.range(e, args.load_seconds))
        for name, query in adapter_queries:
            run(f"prometheus-adapter metric {name}", query, prom.instant)
        rules = json.loads(http_get(f"http://127.0.0.1:{prom_port}/api/v1/rules"))["data"]["groups"]
        bad = [r["name"] for g in rules for r in g["rules"] if r.get("health") != "ok"]
        check("every rule evaluates healthy in Prometheus", not bad, ", ".join(bad))

        # Drain: SIGTERM (the images' STOPSIGNAL) ends the server cleanly.
        server.send_signal(signal.SIGTERM)
        check("dflash-server drains and exits 0 on SIGTERM", server.wait(timeout=40) == 0,
              f"exit {server.returncode}")
    except Exception as error:  # pylint: disable=broad-except
        check("test ran to the end", False, f"{type(error).__name__}: {error}")
    finally:
        for name, proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=40)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if failed:
            for name, _ in procs:
                print(f"--- {name} log (last 20 lines)")
                with open(os.path.join(work, name + ".log")) as log:
                    print("".join(log.readlines()[-20:]), end="")
        subprocess.run(["rm", "-rf", work], check=False)
    print(f"prometheus_test: {len(passed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
