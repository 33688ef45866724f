"""Fixtures for the billing tests: fake AWS credentials, no network, a loopback IMDS.

Every test runs with fake AWS credentials in the environment (never real ones), with
botocore's own IMDS credential lookup switched off, and with outbound connections to
anything but loopback refused, so a mistake fails loudly instead of calling AWS.
`FakeImds` is a ThreadingHTTPServer that speaks IMDSv2 (token PUT, token-checked GETs).
AWS clients are real boto3 clients; tests stub them with `botocore.stub.Stubber` or
run them inside moto's `mock_aws`.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from gpuwatch.billing import BillingCollector, BillingConfig
from gpuwatch.core.clock import ManualClock

FAKE_KEY_ID = "AKIAFAKEKEYID0000001"
FAKE_SECRET = "fAkEsEcReTkEy/DoNotLeak/0123456789abcdefXY"
FAKE_SESSION_TOKEN = "FaKeSeSsIoNtOkEn/DoNotLeak/9876543210"
HOSTNAME = "gpu-node-7"
H100_NVML = "NVIDIA H100 80GB HBM3"
START = 1_767_225_600.0 + 12 * 3600  # 2026-01-01T12:00:00Z
INSTANCE_ID = "i-0123456789abcdef0"


@pytest.fixture(autouse=True)
def fake_aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials only; no shared files, no profile, no IMDS credential lookup."""
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "AWS_ENDPOINT_URL",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", FAKE_SESSION_TOKEN)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("BOTO_CONFIG", "/nonexistent/boto.cfg")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _loopback(host: object) -> bool:
    if host in (None, "localhost"):
        return True
    try:
        return ipaddress.ip_address(str(host)).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse every name lookup and connection that is not for a loopback address."""
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo

    def connect(sock: socket.socket, address: Any) -> None:
        if isinstance(address, tuple) and not _loopback(address[0]):
            raise OSError(f"test tried to reach {address[0]}: the billing tests use no network")
        real_connect(sock, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _loopback(host.decode() if isinstance(host, bytes) else host):
            raise socket.gaierror(f"test tried to resolve {host}: the billing tests use no network")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


class StubSession:
    """Stands in for a boto3 session: hands out pre-built (stubbed) clients by service."""

    def __init__(self, **clients: Any) -> None:
        self.clients = clients
        self.calls: list[tuple[str, str]] = []

    def client(self, service: str, *, region_name: str, config: Any) -> Any:
        self.calls.append((service, region_name))
        return self.clients[service]


@dataclass
class Stubbed:
    """A real boto3 client and its Stubber (activated)."""

    client: Any
    stubber: Stubber


@pytest.fixture
def pricing_stub() -> Iterator[Stubbed]:
    """A real `pricing` client in us-east-1 behind an active Stubber."""
    client = boto3.client("pricing", region_name="us-east-1")
    with Stubber(client) as stubber:
        yield Stubbed(client, stubber)


@pytest.fixture
def ce_stub() -> Iterator[Stubbed]:
    """A real `ce` client behind an active Stubber."""
    client = boto3.client("ce", region_name="us-east-1")
    with Stubber(client) as stubber:
        yield Stubbed(client, stubber)


def price_list_entry(instance_type: str = "p5.48xlarge", usd: str = "55.0400000000") -> str:
    """One PriceList entry (a JSON string) as the Price List Query API returns it."""
    sku = "2TDQ2M5FTDQ6QYGS"
    document = {
        "product": {
            "productFamily": "Compute Instance",
            "attributes": {
                "enhancedNetworkingSupported": "Yes",
                "intelTurboAvailable": "Yes",
                "memory": "2048 GiB",
                "vcpu": "192",
                "gpu": "8",
                "gpuMemory": "640 GB",
                "capacitystatus": "Used",
                "locationType": "AWS Region",
                "storage": "8 x 3840 SSD",
                "instanceFamily": "GPU instance",
                "operatingSystem": "Linux",
                "regionCode": "us-east-1",
                "physicalProcessor": "AMD EPYC 7R13 Processor",
                "servicecode": "AmazonEC2",
                "networkPerformance": "3200 Gigabit",
                "servicename": "Amazon Elastic Compute Cloud",
                "instanceType": instance_type,
                "tenancy": "Shared",
                "usagetype": f"BoxUsage:{instance_type}",
                "normalizationSizeFactor": "384",
                "operation": "RunInstances",
                "licenseModel": "No License required",
                "location": "US East (N. Virginia)",
                "preInstalledSw": "NA",
                "marketoption": "OnDemand",
            },
            "sku": sku,
        },
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {
                f"{sku}.JRTCKXETXF": {
                    "priceDimensions": {
                        f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                            "unit": "Hrs",
                            "endRange": "Inf",
                            "description": f"${float(usd):.3f} per On Demand Linux "
                            f"{instance_type} Instance Hour",
                            "appliesTo": [],
                            "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7",
                            "beginRange": "0",
                            "pricePerUnit": {"USD": usd},
                        }
                    },
                    "sku": sku,
                    "effectiveDate": "2025-06-01T00:00:00Z",
                    "offerTermCode": "JRTCKXETXF",
                    "termAttributes": {},
                }
            },
            "Reserved": {
                f"{sku}.4NA7Y494T4": {
                    "priceDimensions": {
                        f"{sku}.4NA7Y494T4.6YS6EN2CT7": {
                            "unit": "Hrs",
                            "description": "Linux/UNIX (Amazon VPC), p5.48xlarge reserved",
                            "pricePerUnit": {"USD": "33.6100000000"},
                        }
                    },
                    "termAttributes": {
                        "LeaseContractLength": "1yr",
                        "OfferingClass": "standard",
                        "PurchaseOption": "No Upfront",
                    },
                }
            },
        },
        "version": "20250601000000",
        "publicationDate": "2025-06-01T00:00:00Z",
    }
    return json.dumps(document)


def pricing_params(instance_type: str = "p5.48xlarge", region: str = "us-east-1") -> dict[str, Any]:
    """The exact get_products parameters gpuwatch sends."""
    fields = [
        ("instanceType", instance_type),
        ("regionCode", region),
        ("operatingSystem", "Linux"),
        ("tenancy", "Shared"),
        ("preInstalledSw", "NA"),
        ("capacitystatus", "Used"),
        ("licenseModel", "No License required"),
        ("marketoption", "OnDemand"),
    ]
    return {
        "ServiceCode": "AmazonEC2",
        "Filters": [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in fields],
        "FormatVersion": "aws_v1",
        "MaxResults": 100,
    }


def pricing_response(usd: str = "55.0400000000") -> dict[str, Any]:
    """A get_products answer with one p5.48xlarge product."""
    return {"FormatVersion": "aws_v1", "PriceList": [price_list_entry(usd=usd)]}


def make_collector(
    config: BillingConfig,
    tmp_path: Path,
    *,
    clock: ManualClock | None = None,
    session: Any = None,
    hostname: str = HOSTNAME,
    gpu_count: int = 8,
    gpu_name: str = H100_NVML,
    catalog_price: float | None = 6.88,
    http_timeout: float = 0.5,
) -> tuple[BillingCollector, ManualClock]:
    """A collector on a manual clock, its state in `tmp_path`, AWS via `session`."""
    clock = clock or ManualClock(START)
    collector = BillingCollector(
        config,
        state_dir=tmp_path / "state",
        clock=clock,
        hostname=hostname,
        gpu_count=gpu_count,
        gpu_name=gpu_name,
        catalog_price_usd_per_gpu_hour=catalog_price,
        session_factory=None if session is None else (lambda: session),
        http_timeout=http_timeout,
    )
    return collector, clock


@dataclass
class FakeImds:
    """A loopback IMDSv2: tokens from PUT, metadata only for GETs with a valid token."""

    metadata: dict[str, str] = field(
        default_factory=lambda: {
            "meta-data/instance-id": INSTANCE_ID,
            "meta-data/instance-type": "p5.48xlarge",
            "meta-data/placement/region": "us-east-1",
            "meta-data/instance-life-cycle": "on-demand",
        }
    )
    put_status: int = 200
    accept_tokens: bool = True
    hang_put: bool = False
    tokens: list[str] = field(default_factory=list)
    requests: list[tuple[str, str, int]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    server: ThreadingHTTPServer | None = None

    @property
    def endpoint(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        assert isinstance(host, str)
        return f"http://{host}:{port}"


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out and left is expected here, not an error."""


def _handler(imds: FakeImds) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output clean."""

        def _answer(self, status: int, body: str = "") -> None:
            imds.requests.append((self.command, self.path, status))
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_PUT(self) -> None:
            if imds.hang_put:
                imds.release.wait(5.0)
                return
            if self.path != "/latest/api/token":
                self._answer(404)
            elif not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                self._answer(400)
            elif imds.put_status != 200:
                self._answer(imds.put_status)
            else:
                token = "IMDSTOKEN-" + secrets.token_urlsafe(24)
                imds.tokens.append(token)
                self._answer(200, token)

        def do_GET(self) -> None:
            token = self.headers.get("X-aws-ec2-metadata-token")
            if token is None or token not in imds.tokens or not imds.accept_tokens:
                self._answer(401)
                return
            value = imds.metadata.get(self.path.removeprefix("/latest/"))
            if value is None:
                self._answer(404)
            else:
                self._answer(200, value)

    return Handler


@pytest.fixture
def imds() -> Iterator[FakeImds]:
    """A running FakeImds on 127.0.0.1 (a random port)."""
    fake = FakeImds()
    server = _QuietServer(("127.0.0.1", 0), _handler(fake))
    fake.server = server
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield fake
    fake.release.set()
    server.shutdown()
    server.server_close()
    thread.join(5.0)
