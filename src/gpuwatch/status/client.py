"""Ask the agent on this host for its status document (`GET /status.json`).

The address is the config's `exporter.listen` (or `--listen`); a wildcard address
(`0.0.0.0`, `::`) is asked on loopback. With `exporter.basic_auth_*` the credentials
are read from the password file and sent; with `exporter.tls_cert_file` the request
goes over HTTPS and trusts exactly that certificate (pinned, whatever names it
carries). Anything that goes wrong becomes one line in `AgentAnswer.error`, never
with the password in it.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwatch import __version__
from gpuwatch.config import ExporterConfig
from gpuwatch.core.values import parse_listen_address
from gpuwatch.export.status_json import FORMAT, STATUS_PATH

AGENT_TIMEOUT_SECONDS = 2.0
"""How long `gpuwatch status` waits for the agent (connect and answer, each)."""
MAX_DOCUMENT_BYTES = 32 * 1024 * 1024

_LOOPBACK = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # noqa: S104


@dataclass(frozen=True, slots=True)
class AgentAnswer:
    """The agent's status document, or why there is none (one line, no secrets)."""

    url: str
    document: dict[str, Any] | None = None
    error: str | None = None


def agent_url(exporter: ExporterConfig, listen: str | None = None) -> str:
    """The status URL of the agent that `exporter` (or `listen`) describes."""
    host, port = parse_listen_address(listen or exporter.listen)
    host = _LOOPBACK.get(host, host)
    scheme = "https" if exporter.tls_cert_file is not None else "http"
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}{STATUS_PATH}"


def _pinned_context(cert_file: Path) -> tuple[ssl.SSLContext, bytes]:
    """A client context that trusts `cert_file`, and the DER of its first certificate."""
    pem = cert_file.read_text(encoding="ascii")
    end = "-----END CERTIFICATE-----"
    first = pem[: pem.index(end) + len(end)]
    context = ssl.create_default_context(cafile=str(cert_file))
    context.check_hostname = False  # the certificate itself is pinned below
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return context, ssl.PEM_cert_to_DER_cert(first)


def _credentials(exporter: ExporterConfig) -> str | None:
    """The Authorization header value (raises OSError when the file cannot be read)."""
    if exporter.basic_auth_username is None or exporter.basic_auth_password_file is None:
        return None
    password = exporter.basic_auth_password_file.read_text(encoding="utf-8").rstrip("\r\n")
    token = f"{exporter.basic_auth_username}:{password}".encode()
    return "Basic " + base64.b64encode(token).decode()


_HTTP_PROBLEMS = {
    401: "the agent refused the credentials (exporter.basic_auth_username/_password_file)",
    404: f"the agent serves no {STATUS_PATH} (an older gpuwatch?)",
    503: "the agent has no sample yet",
}


def fetch_status(
    exporter: ExporterConfig,
    *,
    listen: str | None = None,
    timeout: float = AGENT_TIMEOUT_SECONDS,
) -> AgentAnswer:
    """GET the agent's status document; never raises for a missing or broken agent."""
    url = agent_url(exporter, listen)
    host, port = parse_listen_address(listen or exporter.listen)
    host = _LOOPBACK.get(host, host)
    try:
        authorization = _credentials(exporter)
    except OSError as exc:
        return AgentAnswer(url, error=f"cannot read exporter.basic_auth_password_file: {_why(exc)}")
    connection: http.client.HTTPConnection
    pinned: bytes | None = None
    try:
        if exporter.tls_cert_file is not None:
            context, pinned = _pinned_context(exporter.tls_cert_file)
            connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
        else:
            connection = http.client.HTTPConnection(host, port, timeout=timeout)
    except (OSError, ValueError) as exc:
        return AgentAnswer(url, error=f"cannot use exporter.tls_cert_file: {_why(exc)}")
    headers = {"Accept": "application/json", "User-Agent": f"gpuwatch/{__version__} status"}
    if authorization is not None:
        headers["Authorization"] = authorization
    try:
        connection.connect()
        if pinned is not None and _peer_certificate(connection) != pinned:
            return AgentAnswer(
                url, error="the agent's TLS certificate is not exporter.tls_cert_file"
            )
        connection.request("GET", STATUS_PATH, headers=headers)
        response = connection.getresponse()
        body = response.read(MAX_DOCUMENT_BYTES + 1)
    except ssl.SSLError as exc:
        return AgentAnswer(url, error=f"TLS failed: {exc.reason or exc}")
    except TimeoutError:
        return AgentAnswer(url, error=f"no answer within {timeout:g} s")
    except ConnectionRefusedError:
        return AgentAnswer(url, error="nothing listens there")
    except (OSError, http.client.HTTPException) as exc:
        return AgentAnswer(url, error=_why(exc))
    finally:
        connection.close()
    if response.status != 200:
        return AgentAnswer(
            url, error=_HTTP_PROBLEMS.get(response.status, f"HTTP {response.status}")
        )
    return _parse(url, body)


def _peer_certificate(connection: http.client.HTTPConnection) -> bytes | None:
    sock = connection.sock
    return sock.getpeercert(binary_form=True) if isinstance(sock, ssl.SSLSocket) else None


def _parse(url: str, body: bytes) -> AgentAnswer:
    if len(body) > MAX_DOCUMENT_BYTES:
        return AgentAnswer(url, error="the answer is too large to be a status document")
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return AgentAnswer(url, error="the answer is not JSON")
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        return AgentAnswer(url, error=f"the answer is not a {FORMAT} document")
    if not isinstance(document.get("gpus"), list):
        return AgentAnswer(url, error="the status document has no GPU list")
    return AgentAnswer(url, document=document)


def _why(exc: BaseException) -> str:
    """An OS or HTTP error in a few words (strerror where there is one)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
