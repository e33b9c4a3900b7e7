"""A server's CPU time per thread over one run, from two thread_ticks snapshots (thread_cpu.sh),
for host_path_cpu.sh and serving_results.py: the server's CPU microseconds per call in total and
by thread name, the busiest single thread and its busy fraction of the run's wall time (near 1.0:
a serial section caps the rate). Threads born during the run count whole; those that ended during
it are not counted."""
import collections
import os

CLOCK_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def read(path):
    ticks = {}
    with open(path) as f:
        for line in f:
            tid, thread, value = line.split()
            ticks[(tid, thread)] = int(value)
    return ticks


def summary(before, after, wall, calls, hz):
    per_name = collections.Counter()
    busiest = (0.0, "")
    for key, value in after.items():
        seconds = (value - before.get(key, 0)) / float(hz)
        per_name[key[1]] += seconds
        busiest = max(busiest, (seconds, key[1]))

    def us(seconds):
        return round(seconds * 1e6 / calls, 1) if calls else None

    return {
        "server_cpu_us_per_call": us(sum(per_name.values())),
        "cpu_us_per_call_by_thread_name": {n: us(s) for n, s in per_name.most_common() if us(s)},
        "busiest_thread": busiest[1],
        "busiest_thread_busy_fraction": round(busiest[0] / wall, 3) if wall > 0 else None,
    }
