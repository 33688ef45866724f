"""The agent's HTTP server as `[exporter]` configures it: address, TLS, basic auth."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry

from gpuwatch.config import ExporterConfig
from gpuwatch.core.values import parse_listen_address
from gpuwatch.export.server import BasicAuth, MetricsServer, Readiness, StatusBody, TlsFiles


def metrics_server(
    exporter: ExporterConfig,
    registry: CollectorRegistry,
    readiness: Readiness,
    *,
    version: Callable[[], object],
    status: StatusBody,
) -> MetricsServer:
    """A MetricsServer (not started) on `exporter.listen`, with TLS when both the
    certificate and the key are set and basic auth when user and password file are.
    OSError when the address cannot be bound."""
    host, port = parse_listen_address(exporter.listen)
    tls = None
    if exporter.tls_cert_file and exporter.tls_key_file:
        tls = TlsFiles(exporter.tls_cert_file, exporter.tls_key_file)
    auth = None
    if exporter.basic_auth_username and exporter.basic_auth_password_file:
        auth = BasicAuth.from_file(exporter.basic_auth_username, exporter.basic_auth_password_file)
    return MetricsServer(
        host, port, registry, readiness, tls=tls, auth=auth, version=version, status=status
    )
