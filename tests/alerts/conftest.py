"""Fixtures for the alert tests: a real loopback "Slack" and snapshot builders.

`FakeSlack` is a ThreadingHTTPServer on 127.0.0.1 that records every POST (JSON body and
the status it answered) and answers from a script (`replies`), then with `default`.
Snapshots are real `FleetSnapshot` objects on a `ManualClock`.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from gpuwatch.alerts import SlackConfig
from gpuwatch.alerts.dispatcher import AlertDispatcher
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import DriverInfo, FleetSnapshot, GpuIdentity, GpuSample, ProcessSample
from gpuwatch.core.verdict import GpuVerdict, Recommendation

SECRET_TOKEN = "T0SECRET/B0SECRET/xoxSeCrEtToKeN1234567890"  # a fake, to detect leaks
HOSTNAME = "gpu-host-1"
GIB = 2**30
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z


@dataclass(frozen=True)
class Reply:
    """One scripted answer: status, body, headers, and a delay before answering (s)."""

    status: int = 200
    body: str = "ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay_seconds: float = 0.0


OK = Reply()
SERVER_ERROR = Reply(500, "internal_error")
RATE_LIMITED = Reply(429, "rate_limited", {"Retry-After": "1"})
NO_SERVICE = Reply(404, "no_service")
ARCHIVED = Reply(410, "channel_is_archived")
PROHIBITED = Reply(403, "action_prohibited")
INVALID = Reply(400, "invalid_payload")
HANG = Reply(0, "", delay_seconds=2.0)  # status 0: never answers (the client times out)


@dataclass
class Post:
    """One request the fake Slack received."""

    body: dict[str, Any]
    status: int

    @property
    def message_id(self) -> int:
        """The `alert #N` id from the context block (-1 when there is none)."""
        for block in self.body.get("blocks", []):
            if block.get("type") == "context":
                for element in block["elements"]:
                    found = re.search(r"alert #(\d+)", element.get("text", ""))
                    if found:
                        return int(found.group(1))
        return -1


class FakeSlack:
    """A scripted incoming-webhook endpoint on loopback."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.default = OK
        self.posts: list[Post] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.server.handle_error = lambda *_args: None  # type: ignore[method-assign]
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        port = self.server.server_address[1]
        return f"http://127.0.0.1:{port}/services/{SECRET_TOKEN}"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def delivered(self) -> list[Post]:
        with self._lock:
            return [p for p in self.posts if 200 <= p.status < 300]

    def all_posts(self) -> list[Post]:
        with self._lock:
            return list(self.posts)

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            reply = self.replies.popleft() if self.replies else self.default
            self.posts.append(Post(body, reply.status))
            return reply

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                reply = fake._next(body)
                if reply.delay_seconds and fake._closing.wait(reply.delay_seconds):
                    return
                if reply.status == 0:
                    return
                data = reply.body.encode()
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def close(self) -> None:
        if self._closing.is_set():
            return
        self._closing.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback requests never go through a developer's proxy."""
    for name in list(os.environ):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.delenv(name)


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack()
    yield fake
    fake.close()


class SleepRecorder:
    """An instant `sleep` that remembers what it was asked to wait (s)."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


FAST = SlackConfig(
    timeout_seconds=0.3,
    retry_backoff_seconds=0.01,
    retry_backoff_max_seconds=2.0,
    max_retries=3,
)


class Harness:
    """Dispatchers on one state dir, a manual clock and the fake Slack; closes them all."""

    def __init__(self, tmp_path: Path, slack: FakeSlack) -> None:
        self.state_dir = tmp_path / "state"
        self.slack = slack
        self.clock = ManualClock(START)
        self.sleep = SleepRecorder()
        self.dispatchers: list[AlertDispatcher] = []

    def dispatcher(self, config: SlackConfig = FAST, **kwargs: Any) -> AlertDispatcher:
        kwargs.setdefault("sleep", self.sleep)
        dispatcher = AlertDispatcher(
            config, self.slack.url, self.state_dir, self.clock, HOSTNAME, **kwargs
        )
        self.dispatchers.append(dispatcher)
        return dispatcher

    def close(self) -> None:
        for dispatcher in self.dispatchers:
            dispatcher.stop(timeout=2.0)


@pytest.fixture
def harness(tmp_path: Path, slack: FakeSlack) -> Iterator[Harness]:
    h = Harness(tmp_path, slack)
    yield h
    h.close()


# -- snapshot builders ------------------------------------------------------------------


def uuid_of(index: int) -> str:
    return f"GPU-{index:08x}-1111-2222-3333-444455556666"


def gpu(index: int, processes: tuple[ProcessSample, ...] | None = (), name: str = "") -> GpuSample:
    identity = GpuIdentity(
        index=index,
        uuid=uuid_of(index),
        name=name or "NVIDIA H100 80GB HBM3",
        serial=None,
        pci_bus_id=f"00000000:{index + 0x18:02X}:00.0",
        memory_total_bytes=80 * GIB,
        power_limit_watts=700.0,
        gpm_supported=True,
    )
    return GpuSample(identity=identity, up=True, processes=processes)


def verdict(
    index: int,
    state: str,
    since: float,
    *,
    overprovisioned: bool | None = None,
    recommendation: Recommendation | None = None,
    activity: float | None = 0.0,
    workload: str | None = None,
) -> GpuVerdict:
    return GpuVerdict(
        gpu_index=index,
        uuid=uuid_of(index),
        state=state,
        state_since_seconds=since,
        inactive_since_seconds=since if state in ("idle", "held") else None,
        idle_seconds_total=0.0,
        activity_mean_ratio=activity,
        overprovisioned=overprovisioned,
        recommendation=recommendation,
        workload=workload,
    )


def snapshot(
    clock: ManualClock, verdicts: list[GpuVerdict], gpus: list[GpuSample] | None = None
) -> FleetSnapshot:
    if gpus is None:
        gpus = [gpu(v.gpu_index) for v in verdicts]
    return FleetSnapshot(
        timestamp_seconds=clock.time(),
        driver=DriverInfo("580.65.06", "13.0", "13.580.65.06"),
        gpus=tuple(gpus),
        verdicts=tuple(verdicts),
        hostname=HOSTNAME,
    )


HELD_PROCESSES = (
    ProcessSample(pid=4242, name="python train.py", kind="compute", memory_used_bytes=71 * GIB),
    ProcessSample(pid=777, name="jupyter-kernel", kind="compute", memory_used_bytes=GIB // 2),
)


def metric_values(families: Callable[[], Iterator[Any]]) -> dict[str, float]:
    """`name{label="v"}` -> value for every sample the families yield."""
    values: dict[str, float] = {}
    for family in families():
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return values


def metrics_text(dispatcher: AlertDispatcher) -> str:
    class _Alerts(Collector):
        def collect(self) -> Iterator[Any]:
            return dispatcher.families()

    registry = CollectorRegistry()
    registry.register(_Alerts())
    return generate_latest(registry).decode()
