"""Pure parsing of the few counters gpuwatch wants out of a server's /metrics body.

An inference server's page is mostly histograms nobody here needs (a vLLM page is easily
200 KB), so instead of parsing every line, `find_samples` searches the raw bytes for the
wanted names and parses only the lines that start with them. It follows the Prometheus
text format (and the OpenMetrics lines a lenient reader meets): escaped label values
(``\\\\``, ``\\"``, ``\\n``), optional timestamps, exemplars after `` # ``, CRLF line
ends, and nothing after an OpenMetrics ``# EOF`` line. Quoted (UTF-8) metric names are
not supported. No I/O here: the tests feed literals.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

LabelSet = tuple[tuple[str, str], ...]
"""A series' labels as sorted (name, value) pairs: a hashable series key."""

Sample = tuple[LabelSet, float]


class ExpositionError(ValueError):
    """The body is not a usable exposition of the wanted counters; the message says why."""


_LABEL = re.compile(
    r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"[ \t]*(,?)[ \t]*'
)
_ESCAPE = re.compile(r"\\(.)")
_UNESCAPED = {"\\": "\\", '"': '"', "n": "\n"}
_SUFFIXES = ("_total", "_sum")
_EOF = b"# EOF"


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    # like prometheus-client: \\, \" and \n are escapes; any other pair stays as it is
    return _ESCAPE.sub(lambda m: _UNESCAPED.get(m.group(1), m.group(0)), value)


def _number(token: str, line: str) -> float:
    if "_" in token:  # Python's float() accepts 1_000; the format does not
        raise ExpositionError(f"invalid value in {line!r}")
    try:
        return float(token)
    except ValueError:
        raise ExpositionError(f"invalid value in {line!r}") from None


def parse_sample_line(line: str, name: str) -> Sample:
    """(labels, value) of one sample line of metric `name`; raises ExpositionError.

    The line must start with `name` followed by ``{``, a space or a tab; the timestamp
    and any exemplar are checked for shape and dropped.
    """
    line = line.strip()
    if not line.startswith(name):
        raise ExpositionError(f"not a sample of {name}: {line!r}")
    rest = line[len(name) :]
    labels: list[tuple[str, str]] = []
    if rest.startswith("{"):
        pos = 1
        while True:
            if rest.startswith("}", pos):
                pos += 1
                break
            match = _LABEL.match(rest, pos)
            if match is None:
                raise ExpositionError(f"invalid labels in {line!r}")
            labels.append((match.group(1), _unescape(match.group(2))))
            pos = match.end()
            if not match.group(3) and not rest.startswith("}", pos):
                raise ExpositionError(f"invalid labels in {line!r}")
        rest = rest[pos:]
        if len({label for label, _ in labels}) != len(labels):
            raise ExpositionError(f"duplicate label in {line!r}")
    elif rest[:1] not in (" ", "\t"):
        raise ExpositionError(f"not a sample of {name}: {line!r}")
    tokens = rest.split()
    if not tokens or tokens[0] == "#":
        raise ExpositionError(f"no value in {line!r}")
    value = _number(tokens[0], line)
    tail = tokens[1:]
    if tail and tail[0] != "#":
        _number(tail[0], line)  # a timestamp
        tail = tail[1:]
    if tail and tail[0] != "#":  # an exemplar (" # {...} value [ts]") may follow, else nothing
        raise ExpositionError(f"unexpected text after the value in {line!r}")
    return tuple(sorted(labels)), value


def _family_stem(name: str) -> str:
    """The family part every line about `name` contains (`x` for `x_total` or `x_sum`)."""
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _body_end(body: bytes) -> int:
    """Where the exposition ends: at an OpenMetrics ``# EOF`` line, else the end."""
    pos = body.find(_EOF)
    while pos >= 0:
        at_line_start = pos == 0 or body[pos - 1 : pos] == b"\n"
        after = body[pos + len(_EOF) : pos + len(_EOF) + 1]
        if at_line_start and after in (b"", b"\n", b"\r"):
            return pos
        pos = body.find(_EOF, pos + 1)
    return len(body)


def find_samples(body: bytes, names: Iterable[str]) -> dict[str, list[Sample]]:
    """The samples of each wanted sample name in a /metrics body.

    A name maps to its samples when its family is declared (``# TYPE``/``# HELP``) or
    has samples; a declared family without samples maps to ``[]``; a name neither
    declared nor sampled is left out. Raises ExpositionError on a malformed wanted line.
    """
    end = _body_end(body)
    found: dict[str, list[Sample]] = {}
    for name in names:
        stem = _family_stem(name)
        stem_bytes = stem.encode()
        suffix = name[len(stem) :].encode()
        declared = False
        samples: list[Sample] = []
        pos = body.find(stem_bytes, 0, end)
        while pos >= 0:
            after = pos + len(stem_bytes)
            line_start = body.rfind(b"\n", 0, pos) + 1
            line_end = body.find(b"\n", after, end)
            if line_end < 0:
                line_end = end
            prefix = body[line_start:pos]
            if not prefix.strip():
                if body.startswith(suffix, after) and body[
                    after + len(suffix) : after + len(suffix) + 1
                ] in (b"{", b" ", b"\t"):
                    try:
                        line = body[pos:line_end].decode("utf-8")
                    except UnicodeDecodeError:
                        raise ExpositionError(f"a {name} line is not UTF-8") from None
                    samples.append(parse_sample_line(line, name))
            elif prefix.split() in ([b"#", b"TYPE"], [b"#", b"HELP"]):
                rest = body[after:line_end]
                if rest.startswith(suffix):
                    rest = rest[len(suffix) :]
                declared = declared or rest[:1] in (b" ", b"\t", b"\r", b"")
            pos = body.find(stem_bytes, line_end, end)
        if declared or samples:
            found[name] = samples
    return found


def matching(samples: Iterable[Sample], matchers: Mapping[str, str]) -> dict[LabelSet, float]:
    """Values by series of the samples whose labels include every matcher.

    Raises ExpositionError on a repeated series or a value that is not a finite count.
    """
    series: dict[LabelSet, float] = {}
    for labels, value in samples:
        if matchers:
            present = dict(labels)
            if any(present.get(k) != v for k, v in matchers.items()):
                continue
        if labels in series:
            raise ExpositionError(f"series {dict(labels)} appears twice")
        if not math.isfinite(value) or value < 0:
            raise ExpositionError(f"series {dict(labels)} has value {value}, not a count")
        series[labels] = value
    return series


def counter_series(
    body: bytes,
    names: Iterable[str],
    matchers: Mapping[str, str],
    optional: Iterable[str] = (),
) -> dict[str, dict[LabelSet, float]]:
    """For each wanted name, its matching series' values; raises ExpositionError when a
    name is missing or its samples exist but none matches `matchers`.

    `optional` names are read in the same pass when the body has them and left out of the
    result when it does not (no series matching `matchers` gives an empty mapping).
    """
    names = list(names)
    extra = [name for name in optional if name not in names]
    return select_counters(find_samples(body, [*names, *extra]), names, matchers, extra)


def select_counters(
    found: Mapping[str, list[Sample]],
    names: Iterable[str],
    matchers: Mapping[str, str],
    optional: Iterable[str] = (),
) -> dict[str, dict[LabelSet, float]]:
    """`counter_series` of samples already found (`find_samples`), so that one search of
    the body serves the counters and anything else read from it."""
    names = list(names)
    extra = [name for name in optional if name not in names]
    result: dict[str, dict[LabelSet, float]] = {}
    for name in names:
        if name not in found:
            raise ExpositionError(f"no {name} in the response")
        series = matching(found[name], matchers)
        if found[name] and not series:
            raise ExpositionError(f"no {name} series matches the label matchers")
        result[name] = series
    for name in extra:
        if name in found:
            result[name] = matching(found[name], matchers)
    return result
