"""Slack mrkdwn: names as data, texts within Slack's limits. Pure.

Names (host, GPU model, process, pod, workload, file) are data, never markup: every
message (an alert, a resolve, a reminder, `gpuwatch alert test`, the report's and the
plan's summaries) writes them with `name_text` alone, which puts them in inline code on
one line; other text goes through `escape`. Every text object stays within Slack's
limits (`fit_lines`, `clip_text`); a `plain_text` header takes `header_text`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpuwatch.core.text import counted, flatten, plain_name

MAX_NAME_CHARS = 80
TEXT_MAX_CHARS = 3000

BACKTICK_LOOKALIKE = "\u02cb"  # MODIFIER LETTER GRAVE ACCENT: cannot end a code span
EMPTY_NAME = "(no name)"
_PLAIN_ANGLES = str.maketrans({"<": "\uff1c", ">": "\uff1e"})  # fullwidth < >


def escape(text: str) -> str:
    """Escape the three characters Slack's mrkdwn treats as control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def name_text(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """A name (host, GPU model, process, pod, workload, file) as mrkdwn data, the one
    escaping every Slack message uses: `` `name` ``, at most `limit` + 2 characters.

    - on one line: control characters, line breaks and lone surrogates (undecodable
      bytes read with surrogateescape) written as escapes (`flatten`);
    - in inline code, where Slack renders no formatting (`*bold*`, `_italic_`,
      `~strike~`), no emoji and no links; a backtick in the name, which would end the
      code span and let the rest format, is shown as U+02CB (modifier letter grave);
    - `&`, `<`, `>` escaped, so `<!channel>` or `<@U123>` in a name is text, never a
      mention;
    - shortened with "…" so that the escaped text fits `limit` characters.

    An empty name is written `(no name)`.
    """
    flat = flatten(text).replace("`", BACKTICK_LOOKALIKE)
    if not flat:
        return EMPTY_NAME
    escaped = escape(flat)
    if len(escaped) > limit:
        kept = []
        size = 1  # the "…"
        for char in flat:
            piece = escape(char)
            if size + len(piece) > limit:
                break
            kept.append(piece)
            size += len(piece)
        escaped = "".join(kept) + "…"
    return f"`{escaped}`"


def header_text(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """A name for a `plain_text` object (the header): `core.text.plain_name` (one line,
    at most `limit` characters). Slack shows plain text as it is, but so that no
    `<!channel>` appears anywhere in a payload, `<` and `>` are shown as their fullwidth
    look-alikes."""
    return plain_name(text, limit).translate(_PLAIN_ANGLES)


def clip_text(text: str, limit: int = TEXT_MAX_CHARS) -> str:
    """`text` within `limit` characters, cut at a line break (so no code span or
    entity is cut in two) with a last line saying how many lines were left out."""
    if len(text) <= limit:
        return text
    return fit_lines(text.split("\n"), limit, lambda n: f"… and {counted(n, 'more line')}")


def fit_lines(
    lines: Sequence[str],
    limit: int,
    more: Callable[[int], str],
    separator: str = "\n",
    left_out: int = 0,
) -> str:
    """As many whole `lines` as fit in `limit` characters joined by `separator`, then
    `more(n)` when n items were left out (those that did not fit, plus `left_out` that
    were never given). A first line longer than the limit is cut (`_cut`)."""
    if not lines:
        return more(left_out) if left_out else ""
    kept: list[str] = []
    size = 0
    for i, line in enumerate(lines):
        rest = len(lines) - i - 1 + left_out  # left out if the list stopped after this line
        tail = len(separator) + len(more(rest)) if rest else 0
        cost = len(line) + (len(separator) if kept else 0)
        if size + cost + tail > limit:
            if kept:
                return separator.join(kept) + separator + more(len(lines) - i + left_out)
            rest = len(lines) - 1 + left_out
            if not rest:
                return _cut(line, limit)
            return _cut(line, limit - len(separator) - len(more(rest))) + separator + more(rest)
        kept.append(line)
        size += cost
    return separator.join(kept) + (separator + more(left_out) if left_out else "")


def _cut(line: str, limit: int) -> str:
    """`line` in `limit` characters: cut before the last code span or entity that would
    be broken, so the result has balanced backticks and whole `&...;` entities."""
    if len(line) <= limit:
        return line
    head = line[: max(limit - 1, 0)]
    if head.count("`") % 2:
        head = head[: head.rfind("`")]
    amp = head.rfind("&")
    if amp >= 0 and ";" not in head[amp:]:
        head = head[:amp]
    return head + "…"
