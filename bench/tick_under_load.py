"""The agent's tick interval with 0 and 200 concurrent scrapers, before and after the fix.

The agent: `Agent(config, SimulatedNvml(dgx-h100), ScaledClock(1.0))`, each NVML call
releasing the GIL as the real library's do (`GilReleasingNvml`), with
`per_process_metrics = true` and `dcgm_compat = true` (the largest exposition), opened
and started, so its own `IntervalJob` ticks every second (`interval_seconds = 1`) while
its own HTTP server answers /metrics. Each tick's start is recorded (`time.monotonic`)
by wrapping `Agent.tick`; the interval is the time between consecutive starts and the
duration the time a tick takes.

Scrapers: threads in a separate load-generator process (so that their work does not
compete for the agent's GIL), each on its own kept-alive connection, reconnecting when
the server closes it, scraping /metrics back to back for the whole window.

Two servers, measured in the same run and alternated in rounds so that machine noise
hits both alike:

* before: the server as it was before the fix, rebuilt here: a render per scrape that
  misses the cache (every scrape in flight when a new snapshot lands renders it again:
  `LegacyExposition`, the old `CachedExposition`), and every connection's thread free to
  render and write at once (`max_active_requests` set to the connection cap).
* after: the agent's server as shipped (`export/server.py`): one render per snapshot and
  format, the other scrapes wait for it and get its bytes, and at most
  `MAX_ACTIVE_REQUESTS` requests are answered at once (the others wait on a semaphore,
  holding no GIL).

`--extra-series N` adds N constant series to /metrics, a larger host's exposition.
Run alone: `python bench/tick_under_load.py [--quick] [--extra-series N]`.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import itertools
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from benchlib import SCENARIO, format_table, machine_info, percentile

SCRAPERS = 200
INTERVAL_SECONDS = 1.0
FULL = {"window_seconds": 30.0, "rounds": 2}
QUICK = {"window_seconds": 10.0, "rounds": 1}
SERVERS = ("before", "after")


# -- the load generator (child process) ------------------------------------------------------


def _scrape_for(port: int, scrapers: int, seconds: float) -> dict[str, Any]:
    """`scrapers` threads scraping /metrics back to back for `seconds`."""
    deadline = time.monotonic() + seconds
    done = [0] * scrapers
    errors: list[str] = []

    def scraper(slot: int) -> None:
        conn: http.client.HTTPConnection | None = None
        while time.monotonic() < deadline:
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
                response = conn.getresponse()
                body = response.read()
                if response.status != 200 or not gzip.decompress(body).startswith(b"# HELP"):
                    errors.append(f"status {response.status}")
                done[slot] += 1
                if response.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException, EOFError):
                # an evicted or reset connection: open a new one
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=scraper, args=(i,)) for i in range(scrapers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"requests": sum(done), "errors": errors[:3]}


def _worker() -> int:
    """Answer each stdin line `PORT SCRAPERS SECONDS` with one JSON line of results."""
    for line in sys.stdin:
        port, scrapers, seconds = line.split()
        result = _scrape_for(int(port), int(scrapers), float(seconds))
        print(json.dumps(result), flush=True)
    return 0


# -- the servers ----------------------------------------------------------------------------


class LegacyExposition:
    """`CachedExposition` as it was before the fix: a scrape that misses the cache
    renders, so every scrape in flight when a snapshot lands renders it again."""

    def __init__(self, registry: Any, version: Callable[[], object]) -> None:
        self._registry = registry
        self._version = version
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, bool], bytes] = {}
        self._cached_version: object = None
        self.renders = 0

    def render(self, accept: str, *, gzipped: bool = False) -> tuple[bytes, str]:
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept)
        version = self._version()
        key = (content_type, gzipped)
        with self._lock:
            if version is None or version is not self._cached_version:
                self._cache = {}
                self._cached_version = version
            body = self._cache.get(key)
        if body is None:
            body = encoder(self._registry)
            if gzipped:
                body = gzip.compress(body, compresslevel=5)
            self.renders += 1
            if version is not None:
                with self._lock:
                    if version is self._cached_version:
                        self._cache[key] = body
        return body, content_type


class GilReleasingNvml:
    """The stand-in with every `nvml*` call releasing the GIL, as a real NVML call does
    (ctypes drops the GIL around the C call): `time.sleep(0)` before each call. Without
    it the simulated tick never lets go of the GIL and cannot show how long it waits to
    get it back while scrapes hold it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not name.startswith("nvml") or not callable(value) or isinstance(value, type):
            return value

        def released(*args: Any, **kwargs: Any) -> Any:
            time.sleep(0)
            return value(*args, **kwargs)

        return released


class ExtraSeries:
    """`count` constant series in one family: a larger host's exposition (more GPUs, MIG
    devices, processes) on top of the simulated one, so that a render takes longer."""

    def __init__(self, count: int) -> None:
        self.count = count

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        family = GaugeMetricFamily("bench_extra", "Padding series.", labels=["gpu", "pid"])
        for i in range(self.count):
            family.add_metric([str(i % 64), str(i)], float(i))
        yield family


def _agent(server: str, extra_series: int) -> tuple[Any, list[tuple[float, float]]]:
    """A started agent and the list its ticks append (start, end) monotonic times to."""
    from gpuwatch.agent import Agent
    from gpuwatch.config import AgentConfig, Config, ExporterConfig
    from gpuwatch.core.clock import ScaledClock
    from gpuwatch.export.bounded import MAX_CONNECTIONS
    from gpuwatch.simulate import SimulatedNvml, load_scenario

    config = Config(
        agent=AgentConfig(per_process_metrics=True, interval_seconds=INTERVAL_SECONDS),
        exporter=ExporterConfig(listen="127.0.0.1:0", dcgm_compat=True),
    )
    clock = ScaledClock(1.0)
    nvml = GilReleasingNvml(SimulatedNvml(load_scenario(SCENARIO), clock=clock))
    agent = Agent(config, nvml, clock)
    ticks: list[tuple[float, float]] = []
    tick = agent.tick

    def timed_tick() -> Any:
        start = time.monotonic()
        try:
            return tick()
        finally:
            ticks.append((start, time.monotonic()))

    timed_tick.__name__ = "tick"
    agent.tick = timed_tick  # type: ignore[method-assign]
    if extra_series:
        agent.registry.register(ExtraSeries(extra_series))
    agent.open()
    agent.start()
    assert agent._server is not None, "open() starts the server"
    httpd: Any = agent._server._httpd  # Any: "before" swaps in the duck-typed LegacyExposition
    if server == "before":
        httpd.exposition = LegacyExposition(agent.registry, agent.store.latest)
        httpd.active_requests = threading.BoundedSemaphore(MAX_CONNECTIONS)
    return agent, ticks


def _measure(
    server: str, scrapers: int, seconds: float, load: Any, extra_series: int
) -> dict[str, Any]:
    agent, ticks = _agent(server, extra_series)
    try:
        time.sleep(2 * INTERVAL_SECONDS)  # past start-up
        begin = time.monotonic()
        if scrapers:
            assert load.stdin is not None
            assert load.stdout is not None
            load.stdin.write(f"{agent.port} {scrapers} {seconds}\n")
            load.stdin.flush()
            result = json.loads(load.stdout.readline())
        else:
            time.sleep(seconds)
            result = {"requests": 0, "errors": []}
        end = time.monotonic()
        renders = agent._server._httpd.exposition.renders
        # unloaded now: the tick after the window's last one starts, closing its interval
        time.sleep(2 * INTERVAL_SECONDS)
    finally:
        agent.stop()
    starts = [s for s, _ in ticks]
    durations = [e - s for s, e in ticks if begin <= s <= end]
    intervals = [b - a for a, b in itertools.pairwise(starts) if begin <= a <= end]
    return {
        "intervals": intervals,
        "durations": durations,
        "requests": result["requests"],
        "renders": renders,
        "errors": result["errors"],
        "seconds": end - begin,
    }


def run(quick: bool = False, extra_series: int = 0) -> dict[str, Any]:
    """Each server at 0 and SCRAPERS scrapers, alternated in rounds; `extra_series`
    constant series are added to the exposition (0: the simulated host's alone)."""
    plan = QUICK if quick else FULL
    load = subprocess.Popen(
        [sys.executable, __file__, "--worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    samples: dict[tuple[str, int], list[dict[str, Any]]] = {}
    try:
        for round_no in range(int(plan["rounds"])):
            order = SERVERS if round_no % 2 == 0 else SERVERS[::-1]
            for scrapers in (0, SCRAPERS):
                for server in order:
                    measured = _measure(
                        server, scrapers, float(plan["window_seconds"]), load, extra_series
                    )
                    samples.setdefault((server, scrapers), []).append(measured)
    finally:
        assert load.stdin is not None
        load.stdin.close()
        load.wait(timeout=60)
    rows: dict[str, dict[str, Any]] = {}
    for (server, scrapers), runs in samples.items():
        intervals = [x for r in runs for x in r["intervals"]]
        durations = [x for r in runs for x in r["durations"]]
        rows[f"{server}/{scrapers}"] = {
            "server": server,
            "scrapers": scrapers,
            "ticks": len(durations),
            "interval_p50_s": percentile(intervals, 50),
            "interval_p90_s": percentile(intervals, 90),
            "interval_p99_s": percentile(intervals, 99),
            "interval_max_s": max(intervals),
            "duration_p50_s": percentile(durations, 50),
            "duration_p99_s": percentile(durations, 99),
            "renders_per_tick": sum(r["renders"] for r in runs) / max(len(durations), 1),
            "scrapes_per_second": sum(r["requests"] for r in runs)
            / sum(r["seconds"] for r in runs),
            "errors": [e for r in runs for e in r["errors"]][:3],
        }
    return {
        "machine": machine_info(),
        "plan": plan,
        "scrapers": SCRAPERS,
        "extra_series": extra_series,
        "rows": rows,
    }


def report(result: dict[str, Any]) -> str:
    """The table of tick intervals, and the after/before ratios at each load."""
    rows = result["rows"]
    table = []
    for key in ("before/0", "after/0", f"before/{SCRAPERS}", f"after/{SCRAPERS}"):
        row = rows[key]
        table.append(
            [
                row["server"],
                str(row["scrapers"]),
                str(row["ticks"]),
                f"{row['interval_p50_s']:.3f}",
                f"{row['interval_p90_s']:.3f}",
                f"{row['interval_p99_s']:.3f}",
                f"{row['interval_max_s']:.3f}",
                f"{row['duration_p50_s'] * 1000:.1f}",
                f"{row['duration_p99_s'] * 1000:.1f}",
                f"{row['scrapes_per_second']:.0f}",
                f"{row['renders_per_tick']:.1f}",
            ]
        )
    out = [
        format_table(
            [
                "server",
                "scrapers",
                "ticks",
                "interval p50 s",
                "p90 s",
                "p99 s",
                "max s",
                "tick p50 ms",
                "tick p99 ms",
                "scrapes/s",
                "renders/tick",
            ],
            table,
            left=1,
        ),
        "",
    ]
    ratio_rows = []
    for scrapers in (0, SCRAPERS):
        before, after = rows[f"before/{scrapers}"], rows[f"after/{scrapers}"]
        ratio_rows.append(
            [
                str(scrapers),
                f"{after['interval_p99_s'] / before['interval_p99_s']:.2f}",
                f"{after['interval_max_s'] / before['interval_max_s']:.2f}",
                f"{after['duration_p99_s'] / before['duration_p99_s']:.2f}",
            ]
        )
    out.append(
        format_table(
            ["scrapers", "after/before interval p99", "interval max", "tick p99"], ratio_rows
        )
    )
    machine = result["machine"]
    out.append("")
    out.append(
        f"{machine['cpu_model']}, {machine['cpu_cores']} cores, Python {machine['python']}, "
        f"{machine['date']}, commit {str(machine['git_commit'])[:10]}, "
        f"{result['extra_series']} extra series"
    )
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one short round")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print the raw results as JSON")
    parser.add_argument(
        "--extra-series", type=int, default=0, help="constant series added to /metrics"
    )
    args = parser.parse_args()
    if args.worker:
        return _worker()
    result = run(quick=args.quick, extra_series=args.extra_series)
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
