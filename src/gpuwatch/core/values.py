"""Syntax of config values that several sections share: host names, IP addresses,
listen addresses, HTTP URLs, file paths and one-line text.

Pure checks, no I/O (whether a name resolves or a file opens is `gpuwatch.cli.host_checks`'s
job). A neutral module: every package's config section may import it; it imports none.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated
from urllib.parse import SplitResult, urlsplit

from pydantic import AfterValidator, BeforeValidator

MAX_PORT = 65535

_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_PORT = re.compile(r"^[0-9]{1,5}$")


def check_host(host: str) -> str:
    """`host` unchanged when it is an IPv4 address, an IPv6 address (without brackets)
    or an RFC 1123 host name; raises ValueError saying what is wrong otherwise.

    A name whose last label is all digits must be a whole IPv4 address: `300.1.1.1` is
    an IPv4 address with an octet over 255, not a host name.
    """
    if not host:
        raise ValueError("the host is empty")
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{host!r} is not an IPv6 address") from None
        return host
    name = host.removesuffix(".")
    labels = name.split(".")
    if labels[-1].isdigit() or all(label.isdigit() for label in labels if label):
        try:
            ipaddress.IPv4Address(name)
        except ValueError:
            raise ValueError(
                f"{host!r} is not an IPv4 address (four numbers 0-255 joined by dots)"
            ) from None
        return host
    if len(name) > 253:
        raise ValueError("a host name is at most 253 characters")
    for label in labels:
        if not _LABEL.match(label):
            raise ValueError(
                f"{host!r} is not a host name (labels of letters, digits and inner hyphens, "
                "at most 63 characters, joined by dots)"
            )
    return host


def parse_listen_address(value: str) -> tuple[str, int]:
    """Split `HOST:PORT` or `[IPV6]:PORT` into the bare host and the port (0 picks a
    free one); an empty host listens on all IPv4 interfaces. Raises ValueError."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not _PORT.match(port_text):
        raise ValueError(f"expected HOST:PORT or [IPV6]:PORT, got {value!r}")
    port = int(port_text)
    if port > MAX_PORT:
        raise ValueError(f"port {port} is outside 0-{MAX_PORT}")
    if host.startswith("[") or host.endswith("]"):
        if not (host.startswith("[") and host.endswith("]")) or ":" not in host:
            raise ValueError(f"expected [IPV6]:PORT, got {value!r}")
        return check_host(host[1:-1]), port
    if ":" in host:
        raise ValueError(f"an IPv6 address is written in brackets, as [::1]:9842; got {value!r}")
    if not host:
        return "0.0.0.0", port  # noqa: S104 - an exporter listens on all interfaces by default
    return check_host(host), port


def check_http_url(url: str, *, path_allowed: bool = True) -> SplitResult:
    """The parts of an http(s) URL with a valid host and a port in 1-65535, no
    credentials and no whitespace or control characters; raises ValueError."""
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ValueError("a URL must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a bad port, or brackets that are not an IPv6 address
        raise ValueError(f"not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("credentials in the URL are not supported")
    if port == 0:
        raise ValueError("port 0 is not a port a server listens on")
    check_host(parts.hostname)
    if not path_allowed and (parts.path not in ("", "/") or parts.query or parts.fragment):
        raise ValueError("expected scheme://host[:port] without a path")
    return parts


def check_text(value: str) -> str:
    """`value` unchanged when it is not empty and has no control character (a newline
    would add lines to log and Slack messages); raises ValueError."""
    if not value:
        raise ValueError("must not be empty")
    if any(not c.isprintable() for c in value):
        raise ValueError("must be one line without control characters")
    return value


def check_path(value: object) -> object:
    """`value` unchanged unless it is an empty string or holds a NUL byte (ValueError);
    run before pydantic makes a `Path` of it, which turns "" into "."."""
    if isinstance(value, str | Path):
        text = value if isinstance(value, str) else str(value)
        if not text.strip():
            raise ValueError("the path is empty")
        if "\x00" in text:
            raise ValueError("a path must not contain a NUL byte")
    return value


Text = Annotated[str, AfterValidator(check_text)]
"""A non-empty one-line string without control characters."""

ConfigPath = Annotated[Path, BeforeValidator(check_path)]
"""A file or directory path: not empty, no NUL byte."""
