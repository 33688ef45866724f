"""The boto3 boundary shared by the AWS tiers: sessions, client settings, error policy.

boto3 and botocore are imported lazily inside functions here and in the other
`aws_*.py` modules only, so `import gpuwatch.billing` never loads them. Their objects
stay `Any` (boto3 ships no type stubs). Every AWS call goes through `call_aws`, which
turns each botocore failure into a log-safe `SourceError` carrying the API name and
the AWS error code only — never the message text, which can name accounts and ARNs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gpuwatch.billing.health import SourceError

SessionFactory = Callable[[], Any]
"""Returns a `boto3.session.Session` (or anything with its `client(...)` method)."""

READ_TIMEOUT_FACTOR = 4.0
"""AWS read timeout = this x the connect timeout: Cost Explorer can take seconds."""


def default_session() -> Any:
    """A boto3 session with the usual credential chain (env, files, instance role)."""
    # lazy: boto3 only where an AWS price tier is configured (the agent's memory)
    import boto3  # type: ignore[import-untyped,unused-ignore]  # noqa: TID251, PLC0415

    return boto3.session.Session()


def client_config(*, timeout_seconds: float, retry_mode: str, max_attempts: int) -> Any:
    """A botocore `Config`: connect timeout `timeout_seconds`, read timeout x4, retries."""
    # lazy: botocore only where an AWS price tier is configured
    from botocore import config  # type: ignore[import-untyped,unused-ignore]  # noqa: TID251, PLC0415

    return config.Config(
        connect_timeout=timeout_seconds,
        read_timeout=timeout_seconds * READ_TIMEOUT_FACTOR,
        retries={"mode": retry_mode, "max_attempts": max_attempts},
    )


def make_client(session_factory: SessionFactory, service: str, region: str, config: Any) -> Any:
    """`session.client(service, region_name=region, config=config)`; SourceError on failure."""
    return call_aws(
        f"{service} client",
        lambda: session_factory().client(service, region_name=region, config=config),
    )


def _safe_code(code: object) -> str:
    text = str(code)
    return text if re.fullmatch(r"[A-Za-z0-9.:_-]{1,64}", text) else "error"


def call_aws(
    what: str, call: Callable[[], Any], *, answered: Callable[[], None] | None = None
) -> Any:
    """Run one AWS call; botocore failures become `SourceError`.

    `answered` runs when AWS answered (a response or an error response), i.e. when the
    request counts as made; not when it never left (no credentials, no network).
    """
    # lazy: botocore only where an AWS price tier is configured
    from botocore import exceptions as aws  # type: ignore[import-untyped,unused-ignore]  # noqa: TID251, PLC0415

    try:
        result = call()
    except aws.ClientError as exc:
        if answered is not None:
            answered()
        code = _safe_code(getattr(exc, "response", {}).get("Error", {}).get("Code", "error"))
        raise SourceError(f"{what}: {code}") from None
    except (aws.NoCredentialsError, aws.PartialCredentialsError):
        raise SourceError(f"{what}: no AWS credentials found") from None
    except (aws.ConnectionError, aws.HTTPClientError) as exc:
        raise SourceError(f"{what}: cannot reach AWS ({type(exc).__name__})") from None
    except aws.BotoCoreError as exc:
        raise SourceError(f"{what}: {type(exc).__name__}") from None
    if answered is not None:
        answered()
    return result
