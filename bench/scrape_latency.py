"""Scrape latency of /metrics: the gpuwatch agent against prometheus-client serving the same series.

Targets, all in this process and on 127.0.0.1:

* agent: `Agent(config, SimulatedNvml(dgx-h100), ScaledClock(1.0))` with
  `per_process_metrics = true`, opened and started, so its scheduler samples the eight
  simulated GPUs every second during the whole measurement, as in production.
* baseline: `prometheus_client.start_http_server` serving a static registry built from
  the agent's own /metrics text (`baseline_exporter.static_registry`): the same series,
  with no sampling and no snapshot rendering behind them. prometheus-client's WSGI
  server answers HTTP/1.0 and closes every connection, and its listen backlog is 5: at
  20 concurrent scrapers some reconnects overflow it and wait out the kernel's 1 s SYN
  retransmission, so its p99 would measure that timer, not prometheus-client. The
  backlog is therefore raised to 128 (`LISTEN_BACKLOG`): a faster, stricter baseline.
* waitress: the agent's own cached exposition (`CachedExposition` over the same registry
  and snapshot store) served by waitress (`pip install waitress`, the `bench` extra)
  instead of the agent's bounded hand-written server: the well-kept server that the
  choice in docs/architecture.md ("The HTTP server") was weighed against. Skipped when
  waitress is not installed.
* agent, gzip / baseline, gzip: the same servers, scraped with
  `Accept-Encoding: gzip` as Prometheus scrapes. Both compress when asked:
  prometheus-client on every request (`gzip.compress`, level 9), the agent once per
  snapshot (level 5, cached). The target is stated on the plain pair, as before, and
  checked on the gzip pair as well, each against its own baseline.

The scrapers are threads using `http.client`, one connection each (kept alive where
the server allows it, reconnecting where it closes). They run in a separate
load-generator process, so that client-side work does not compete with the servers for
this process's GIL. Each level (1 scraper, 20 concurrent scrapers) is split into rounds
that rotate the order of the targets, so that drifting machine noise hits them alike.
Every batch opens its connections with one untimed request per scraper, then all
scrapers start together.

Latency is `time.perf_counter` from sending the request to having read the whole body;
throughput is the requests of a batch over its wall time.
Run alone: `python bench/scrape_latency.py [--quick]`.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from benchlib import (
    SCENARIO,
    format_table,
    http_get,
    percentile,
    series_keys,
    series_lines,
    verdict,
)

TARGET_RATIO = 1.5
LISTEN_BACKLOG = 128
TARGETS = ("agent", "baseline", "waitress", "agent_gzip", "baseline_gzip", "waitress_gzip")
LABELS = {
    "agent": "agent",
    "baseline": "baseline",
    "waitress": "waitress",
    "agent_gzip": "agent, gzip",
    "baseline_gzip": "baseline, gzip",
    "waitress_gzip": "waitress, gzip",
}
BASELINE_OF = {
    "agent": "baseline",
    "baseline": "baseline",
    "waitress": "baseline",
    "agent_gzip": "baseline_gzip",
    "baseline_gzip": "baseline_gzip",
    "waitress_gzip": "baseline_gzip",
}
WAITRESS_THREADS = 4  # waitress's default
WAITRESS_CONNECTION_LIMIT = 64  # the agent's own cap, for a like-for-like comparison
GZIP_HEADERS = {"Accept-Encoding": "gzip"}


@dataclass(frozen=True, slots=True)
class Level:
    """One concurrency level: scrapers in parallel, requests each, rounds to split them in."""

    concurrency: int
    requests_per_scraper: int
    rounds: int


FULL_LEVELS = (Level(1, 300, 6), Level(20, 50, 5))
QUICK_LEVELS = (Level(1, 40, 2), Level(20, 10, 2))


@dataclass(frozen=True, slots=True)
class Batch:
    """The result of one batch: every request's latency (s) and the batch's wall time (s)."""

    latencies: list[float]
    wall_seconds: float


# -- the load generator (child process) ------------------------------------------------------


def _scrape_batch(port: int, concurrency: int, requests: int, gzipped: bool) -> dict[str, Any]:
    """`concurrency` threads, each sending one untimed then `requests` timed GETs.

    With `gzipped`, every request asks for `Accept-Encoding: gzip` and every answer must
    come back gzip-encoded; the untimed first body is decompressed to check it.
    """
    headers = GZIP_HEADERS if gzipped else {}
    started: list[float] = []
    barrier = threading.Barrier(concurrency, action=lambda: started.append(time.perf_counter()))
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    errors: list[str] = []

    def scraper(slot: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            conn.request("GET", "/metrics", headers=headers)  # open the connection, untimed
            first = conn.getresponse().read()
            if gzipped and not gzip.decompress(first).startswith(b"# HELP"):
                errors.append("the gzip body is not an exposition")
            barrier.wait()
            for _ in range(requests):
                start = time.perf_counter()
                conn.request("GET", "/metrics", headers=headers)
                response = conn.getresponse()
                body = response.read()
                latencies[slot].append(time.perf_counter() - start)
                if response.status != 200 or not body:
                    errors.append(f"status {response.status}, {len(body)} bytes")
                if gzipped != (response.getheader("Content-Encoding") == "gzip"):
                    errors.append(f"Content-Encoding {response.getheader('Content-Encoding')}")
        except (
            OSError,
            EOFError,
            gzip.BadGzipFile,
            http.client.HTTPException,
            threading.BrokenBarrierError,
        ) as exc:
            errors.append(repr(exc))
            barrier.abort()
        finally:
            conn.close()

    threads = [threading.Thread(target=scraper, args=(i,)) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started[0] if started else 0.0
    return {
        "latencies": [x for slot in latencies for x in slot],
        "wall_seconds": wall,
        "errors": errors,
    }


def _worker() -> int:
    """Answer each stdin line `PORT CONCURRENCY REQUESTS GZIP` with one JSON line of results."""
    for line in sys.stdin:
        port, concurrency, requests, gzipped = (int(x) for x in line.split())
        print(json.dumps(_scrape_batch(port, concurrency, requests, bool(gzipped))), flush=True)
    return 0


class LoadGenerator:
    """The scraper process; `batch()` runs one batch in it."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, __file__, "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def batch(self, port: int, concurrency: int, requests: int, gzipped: bool) -> Batch:
        """Run one batch against 127.0.0.1:`port`; raises RuntimeError on any failed request."""
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._proc.stdin.write(f"{port} {concurrency} {requests} {int(gzipped)}\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("the load generator died")
        result = json.loads(line)
        if result["errors"]:
            raise RuntimeError(f"scrape errors on port {port}: {result['errors'][:3]}")
        return Batch([float(x) for x in result["latencies"]], float(result["wall_seconds"]))

    def close(self) -> None:
        """Stop the load generator."""
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=30)


# -- the measurement --------------------------------------------------------------------------


def _stats(batches: list[Batch]) -> dict[str, float]:
    latencies = [x for batch in batches for x in batch.latencies]
    wall = sum(batch.wall_seconds for batch in batches)
    return {
        "requests": len(latencies),
        "p50_ms": percentile(latencies, 50) * 1000,
        "p90_ms": percentile(latencies, 90) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "mean_ms": sum(latencies) / len(latencies) * 1000,
        "max_ms": max(latencies) * 1000,
        "requests_per_second": len(latencies) / wall if wall > 0 else 0.0,
    }


def _waitress_server(agent: Any) -> Any:
    """A started waitress server answering /metrics from the agent's cached exposition,
    gzip when asked; None when waitress is not installed."""
    try:
        from waitress.server import create_server
    except ImportError:
        return None
    import logging

    # "Task queue depth is N" at 20 scrapers on 4 threads is waitress working as designed
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    from gpuwatch.export.server import CachedExposition

    exposition = CachedExposition(agent.registry, agent.store.latest)

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        gzipped = "gzip" in environ.get("HTTP_ACCEPT_ENCODING", "")
        body, content_type = exposition.render(environ.get("HTTP_ACCEPT", ""), gzipped=gzipped)
        headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
        if gzipped:
            headers.append(("Content-Encoding", "gzip"))
        start_response("200 OK", headers)
        return [body]

    server = create_server(
        app,
        host="127.0.0.1",
        port=0,
        threads=WAITRESS_THREADS,
        connection_limit=WAITRESS_CONNECTION_LIMIT,
        channel_timeout=10,
        backlog=LISTEN_BACKLOG,
    )
    threading.Thread(target=server.run, name="bench-waitress", daemon=True).start()
    return server


def run(quick: bool = False) -> dict[str, Any]:
    """Measure every target at each level; returns the results as plain data."""
    from prometheus_client import start_http_server

    from baseline_exporter import static_registry
    from gpuwatch.agent import Agent
    from gpuwatch.config import AgentConfig, Config, ExporterConfig
    from gpuwatch.core.clock import ScaledClock
    from gpuwatch.simulate import SimulatedNvml, load_scenario

    config = Config(
        agent=AgentConfig(per_process_metrics=True),
        exporter=ExporterConfig(listen="127.0.0.1:0"),
    )
    clock = ScaledClock(1.0)
    agent = Agent(config, SimulatedNvml(load_scenario(SCENARIO), clock=clock), clock)
    agent.open()
    agent.start()
    targets = list(TARGETS)
    load = LoadGenerator()
    server = None
    waitress = _waitress_server(agent)
    if waitress is None:
        targets = [t for t in targets if not t.startswith("waitress")]
    try:
        time.sleep(1.5)  # a second tick, so that GPM ratios (two samples) are in the text
        status, body = http_get(agent.port)
        if status != 200:
            raise RuntimeError(f"agent /metrics answered {status}")
        agent_text = body.decode("utf-8")
        server, _thread = start_http_server(
            0, addr="127.0.0.1", registry=static_registry(agent_text)
        )
        server.socket.listen(LISTEN_BACKLOG)
        baseline_text = http_get(server.server_port)[1].decode("utf-8")
        gzip_bytes = {
            "agent": len(http_get(agent.port, headers=GZIP_HEADERS)[1]),
            "baseline": len(http_get(server.server_port, headers=GZIP_HEADERS)[1]),
        }
        ports = {
            "agent": agent.port,
            "agent_gzip": agent.port,
            "baseline": server.server_port,
            "baseline_gzip": server.server_port,
        }
        if waitress is not None:
            ports["waitress"] = ports["waitress_gzip"] = int(waitress.effective_port)

        def batch(target: str, concurrency: int, requests: int) -> Batch:
            gzipped = target.endswith("_gzip")
            return load.batch(ports[target], concurrency, requests, gzipped)

        for target in targets:  # warm up: code paths, connections, allocator
            batch(target, 1, 10 if quick else 30)
            batch(target, 20, 2 if quick else 3)

        levels = []
        for level in QUICK_LEVELS if quick else FULL_LEVELS:
            batches: dict[str, list[Batch]] = {t: [] for t in targets}
            per_round = level.requests_per_scraper // level.rounds
            for round_index in range(level.rounds):
                shift = round_index % len(targets)
                for target in targets[shift:] + targets[:shift]:
                    batches[target].append(batch(target, level.concurrency, per_round))
            stats = {t: _stats(b) for t, b in batches.items()}
            base, base_gzip = stats["baseline"], stats["baseline_gzip"]
            levels.append(
                {
                    "concurrency": level.concurrency,
                    "requests_per_scraper": per_round * level.rounds,
                    "rounds": level.rounds,
                    "targets": stats,
                    "ratio_p50": stats["agent"]["p50_ms"] / base["p50_ms"],
                    "ratio_p99": stats["agent"]["p99_ms"] / base["p99_ms"],
                    "gzip_ratio_p50": stats["agent_gzip"]["p50_ms"] / base_gzip["p50_ms"],
                    "gzip_ratio_p99": stats["agent_gzip"]["p99_ms"] / base_gzip["p99_ms"],
                }
            )
    finally:
        load.close()
        if waitress is not None:
            waitress.close()
        if server is not None:
            server.shutdown()
            server.server_close()
        agent.stop()

    return {
        "scenario": SCENARIO,
        "per_process_metrics": True,
        "interval_seconds": config.agent.interval_seconds,
        "series": len(series_lines(agent_text)),
        "families": sum(1 for line in agent_text.splitlines() if line.startswith("# TYPE")),
        "body_bytes": len(body),
        "gzip_body_bytes": gzip_bytes["agent"],
        "baseline_series": len(series_lines(baseline_text)),
        "baseline_body_bytes": len(baseline_text.encode("utf-8")),
        "baseline_gzip_body_bytes": gzip_bytes["baseline"],
        "same_series": series_keys(agent_text) == series_keys(baseline_text),
        "baseline_listen_backlog": LISTEN_BACKLOG,
        "target_ratio": TARGET_RATIO,
        "waitress": waitress is not None,
        "levels": levels,
    }


def report(result: dict[str, Any]) -> str:
    """The printed tables of one run."""
    rows = []
    for level in result["levels"]:
        for target, stats in level["targets"].items():
            base = level["targets"][BASELINE_OF[target]]
            ratio_p50 = stats["p50_ms"] / base["p50_ms"]
            ratio_p99 = stats["p99_ms"] / base["p99_ms"]
            p50, p99 = f"{ratio_p50:.2f}x", f"{ratio_p99:.2f}x"
            check = ""  # the target is the agent's; waitress is a comparison
            if target.startswith("agent"):
                check = verdict(max(ratio_p50, ratio_p99) <= result["target_ratio"])
            rows.append(
                [
                    f"{level['concurrency']} x {level['requests_per_scraper']}",
                    LABELS[target],
                    f"{stats['p50_ms']:.2f}",
                    f"{stats['p99_ms']:.2f}",
                    f"{stats['mean_ms']:.2f}",
                    f"{stats['requests_per_second']:.0f}",
                    p50,
                    p99,
                    check,
                ]
            )
    table = format_table(
        [
            "scrapers x requests",
            "target",
            "p50 ms",
            "p99 ms",
            "mean ms",
            "req/s",
            "p50 vs base",
            "p99 vs base",
            f"<= {result['target_ratio']}x",
        ],
        rows,
        left=2,
    )
    head = (
        f"Scrape latency of /metrics, {result['scenario']} (8 GPUs, 64 processes), "
        f"per_process_metrics = true, interval {result['interval_seconds']:g} s: "
        f"{result['series']} series in {result['families']} families, "
        f"{result['body_bytes']} bytes ({result['gzip_body_bytes']} gzipped)\n"
        f"baseline: prometheus-client start_http_server, static registry of the same text "
        f"({result['baseline_series']} series, {result['baseline_body_bytes']} bytes, "
        f"{result['baseline_gzip_body_bytes']} gzipped, "
        f"same series: {'yes' if result['same_series'] else 'NO'}), "
        f"listen backlog {result['baseline_listen_backlog']}\n"
        f"rows 'gzip': Accept-Encoding: gzip, compared with the baseline's gzip row\n"
        + (
            f"waitress: the agent's cached exposition served by waitress "
            f"(threads {WAITRESS_THREADS}, connection_limit {WAITRESS_CONNECTION_LIMIT})"
            if result.get("waitress")
            else "waitress: not installed, not measured"
        )
    )
    return f"{head}\n{table}"


def main() -> int:
    """Command line: `--quick` for the smoke run; `--worker` is the load generator."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests (smoke run)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return _worker()
    print(report(run(quick=args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
