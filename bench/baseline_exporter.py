"""The baseline exporter: prometheus-client serving a static copy of the agent's series.

`static_registry(text)` parses a `/metrics` exposition with prometheus-client's own
parser and returns a registry whose one collector yields those families unchanged, so
the baseline serves exactly the series the agent served, with none of the agent's work
behind them.

Run as a script, it is the minimal process of `agent_resources.py`: it imports
prometheus_client, serves that registry with `start_http_server` on 127.0.0.1, and
runs an APScheduler `BackgroundScheduler` job every second that does nothing, until
SIGTERM or SIGINT:

    python bench/baseline_exporter.py --metrics-file metrics.txt --port 9900
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FrameType

from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry


class StaticCollector(Collector):
    """Yields the same, already built metric families on every scrape."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterator[Metric]:
        yield from self._families


def static_registry(text: str) -> CollectorRegistry:
    """A registry serving the families of the exposition `text`, parsed once."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StaticCollector(text_string_to_metric_families(text)))
    return registry


def _nothing() -> None:
    """The baseline's scheduled job: the cost of being woken every second, and no more."""


def main() -> int:
    """Serve the static registry and tick an empty job every second until signalled."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics-file", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()

    registry = static_registry(args.metrics_file.read_text(encoding="utf-8"))
    server, _thread = start_http_server(args.port, addr="127.0.0.1", registry=registry)
    scheduler = BackgroundScheduler(daemon=True)
    scheduler.add_job(_nothing, "interval", seconds=1.0, id="nothing", max_instances=1)
    scheduler.start()

    stop = threading.Event()

    def _on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    while not stop.wait(0.5):
        pass
    scheduler.shutdown(wait=True)
    server.shutdown()
    server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
