"""Fixtures: a loopback HTTP server whose /metrics the test controls, and vLLM pages."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Reply:
    """What the next requests get: a body, a status, an optional truncation or stall."""

    body: bytes = b""
    status: int = 200
    content_type: str = "text/plain; version=0.0.4; charset=utf-8"
    truncate_to: int | None = None  # send Content-Length of the whole body, then only this much
    stall_seconds: float = 0.0  # wait (interruptibly) before answering
    content_encoding: str | None = None


@dataclass
class PageServer:
    """A real HTTP server on 127.0.0.1 serving `reply` at every path."""

    reply: Reply = field(default_factory=Reply)
    requests: int = 0
    release: threading.Event = field(default_factory=threading.Event)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def serve(self, body: bytes | str, **kwargs: Any) -> None:
        """Serve `body` (and the given Reply fields) from now on."""
        data = body.encode() if isinstance(body, str) else body
        self.reply = Reply(body=data, **kwargs)


def _handler(state: PageServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests += 1
            reply = state.reply
            if reply.stall_seconds:
                state.release.wait(reply.stall_seconds)
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            if reply.content_encoding:
                self.send_header("Content-Encoding", reply.content_encoding)
            self.end_headers()
            body = reply.body if reply.truncate_to is None else reply.body[: reply.truncate_to]
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (the timeout test) is expected, not worth a traceback."""


@pytest.fixture
def page_server() -> Iterator[PageServer]:
    state = PageServer()
    server = _QuietServer(("127.0.0.1", 0), _handler(state))
    state.port = int(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield state
    state.release.set()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def vllm_page(
    prompt: float,
    generation: float,
    *,
    models: tuple[str, ...] = ("llama",),
    by_source: dict[str, float] | None = None,
) -> str:
    """A vLLM /metrics page (prometheus-client's text format) with noise around the counters;
    `by_source` adds `vllm:prompt_tokens_by_source_total` (value x model's rank, like the
    other counters)."""
    lines = [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
    ]
    lines += [f'vllm:num_requests_running{{engine="0",model_name="{m}"}} 3.0' for m in models]
    for family, value in (("prompt", prompt), ("generation", generation)):
        lines += [
            f"# HELP vllm:{family}_tokens_total Number of {family} tokens processed.",
            f"# TYPE vllm:{family}_tokens_total counter",
        ]
        lines += [
            f'vllm:{family}_tokens_total{{engine="0",model_name="{m}"}} {value * (i + 1)}'
            for i, m in enumerate(models)
        ]
        lines += [
            f"# HELP vllm:{family}_tokens_created Number of {family} tokens processed.",
            f"# TYPE vllm:{family}_tokens_created gauge",
        ]
        lines += [
            f'vllm:{family}_tokens_created{{engine="0",model_name="{m}"}} 1.7e+09' for m in models
        ]
    if by_source is not None:
        lines += [
            "# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.",
            "# TYPE vllm:prompt_tokens_by_source_total counter",
        ]
        lines += [
            f'vllm:prompt_tokens_by_source_total{{engine="0",model_name="{m}",source="{origin}"}}'
            f" {value * (i + 1)}"
            for i, m in enumerate(models)
            for origin, value in by_source.items()
        ]
    lines += [
        "# HELP vllm:request_prompt_tokens Number of prefill tokens processed.",
        "# TYPE vllm:request_prompt_tokens histogram",
    ]
    for m in models:
        for le in ("1.0", "2.0", "+Inf"):
            lines.append(
                f'vllm:request_prompt_tokens_bucket{{engine="0",le="{le}",model_name="{m}"}} 4.0'
            )
        lines.append(f'vllm:request_prompt_tokens_count{{engine="0",model_name="{m}"}} 4.0')
        lines.append(f'vllm:request_prompt_tokens_sum{{engine="0",model_name="{m}"}} 999.0')
    return "\n".join(lines) + "\n"
