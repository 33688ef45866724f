"""This instance's identity from the EC2 instance metadata service (IMDSv2), over urllib.

Session-oriented IMDSv2 only: a `PUT /latest/api/token` first, then GETs that carry the
token. The token lives in local variables for one fetch and is never logged, cached or
put into an exception. No boto3 here; proxies from the environment are ignored (IMDS is
link-local). In a container the instance's metadata hop limit must be 2, else the token
PUT never gets an answer and the fetch times out.
"""

from __future__ import annotations

import http.client
import re
import urllib.error
import urllib.request
from dataclasses import replace

from gpuwatch.billing.config import INSTANCE_TYPE_PATTERN, REGION_PATTERN, BillingConfig
from gpuwatch.billing.health import SourceError, SourceHealth
from gpuwatch.billing.quotes import InstanceIdentity

TOKEN_PATH = "/latest/api/token"  # noqa: S105 - a URL path, not a secret
TOKEN_TTL_SECONDS = 300
"""Lifetime asked for the IMDSv2 token; one fetch needs it for a few requests only."""

MAX_BODY_BYTES = 4096

_FIELDS: tuple[tuple[str, str, str, bool], ...] = (
    # (identity field, metadata path, pattern, required)
    ("instance_id", "meta-data/instance-id", r"^i-[0-9a-f]{8,17}$", True),
    ("instance_type", "meta-data/instance-type", INSTANCE_TYPE_PATTERN, True),
    ("region", "meta-data/placement/region", REGION_PATTERN, True),
    ("lifecycle", "meta-data/instance-life-cycle", r"^[a-z][a-z-]{0,31}$", False),
)

IMDS_INITIAL_BACKOFF_SECONDS = 30.0
IMDS_MAX_BACKOFF_SECONDS = 3600.0


class ImdsClient:
    """Reads the instance identity from IMDSv2 at `endpoint` (scheme://host[:port])."""

    def __init__(self, endpoint: str, *, timeout_seconds: float) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.timeout_seconds = timeout_seconds
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def fetch(self) -> InstanceIdentity:
        """Token PUT, then one GET per field; raises SourceError (log-safe) on failure."""
        token = self._request(
            "PUT",
            TOKEN_PATH,
            {"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL_SECONDS)},
            what="the IMDSv2 token PUT",
        )
        if not token or len(token) > 1024:
            raise SourceError("IMDS answered the token PUT with no usable token")
        values: dict[str, str | None] = {}
        for name, path, pattern, required in _FIELDS:
            try:
                value = self._request(
                    "GET", f"/latest/{path}", {"X-aws-ec2-metadata-token": token}, what=path
                )
            except _NotFoundError:
                if required:
                    raise SourceError(f"IMDS has no {path}") from None
                values[name] = None
                continue
            if not re.fullmatch(pattern, value):
                raise SourceError(f"IMDS gave an unexpected {path}")
            values[name] = value
        return InstanceIdentity(**values)

    def _request(self, method: str, path: str, headers: dict[str, str], *, what: str) -> str:
        request = urllib.request.Request(  # noqa: S310 - the config allows http(s) URLs only
            self.endpoint + path, method=method, headers=headers
        )
        try:
            with self._opener.open(request, timeout=self.timeout_seconds) as response:
                body: bytes = response.read(MAX_BODY_BYTES + 1)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code == 404:
                raise _NotFoundError from None
            raise SourceError(f"IMDS answered {what} with HTTP {exc.code}") from None
        except (urllib.error.URLError, TimeoutError, OSError, http.client.HTTPException) as exc:
            hint = " (in a container the metadata hop limit must be 2)" if method == "PUT" else ""
            reason = getattr(exc, "reason", exc)
            kind = "timed out" if isinstance(reason, TimeoutError) else type(reason).__name__
            raise SourceError(
                f"no answer from IMDS at {self.endpoint} to {what}: {kind}{hint}"
            ) from None
        if len(body) > MAX_BODY_BYTES:
            raise SourceError(f"IMDS answer to {what} is too long")
        return body.decode("utf-8", errors="replace").strip()


class _NotFoundError(Exception):
    """HTTP 404 from IMDS: the category does not exist on this instance."""


class IdentityResolver:
    """The identity: IMDS (asked until it answers once, with backoff) plus config overrides.

    The config's `instance_type` and `region` win over IMDS's. Without IMDS the identity
    holds only what the config says (None when it says nothing).
    """

    def __init__(self, config: BillingConfig, *, timeout_seconds: float) -> None:
        self._config = config
        self._client = (
            ImdsClient(config.imds_endpoint, timeout_seconds=timeout_seconds)
            if config.imds
            else None
        )
        self.health = SourceHealth(
            "imds",
            initial_backoff_seconds=IMDS_INITIAL_BACKOFF_SECONDS,
            max_backoff_seconds=IMDS_MAX_BACKOFF_SECONDS,
        )
        self._imds: InstanceIdentity | None = None

    @property
    def enabled(self) -> bool:
        """Whether IMDS is asked at all."""
        return self._client is not None

    def resolve(self, now: float) -> InstanceIdentity | None:
        """The identity at `now` (epoch seconds); asks IMDS when it is due."""
        if self._client is not None and self._imds is None and self.health.may_try(now):
            try:
                self._imds = self._client.fetch()
            except SourceError as exc:
                self.health.failed(now, str(exc))
            else:
                self.health.succeeded()
        base = self._imds or InstanceIdentity(None, None, None, None)
        merged = replace(
            base,
            instance_type=self._config.instance_type or base.instance_type,
            region=self._config.region or base.region,
        )
        if merged == InstanceIdentity(None, None, None, None):
            return None
        return merged
