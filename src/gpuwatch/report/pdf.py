"""The report as PDF: the HTML page (`html.py`) laid out by WeasyPrint.

WeasyPrint (PyPI, the `pdf` extra: `gpuwatch.core.install.install_hint("pdf")`) draws the inline SVG
charts itself and needs Pango from the system (Debian `libpango-1.0-0`,
`libpangoft2-1.0-0`). It is imported only here and only when a PDF is asked for; when
it or Pango is missing, `render_pdf` raises `PdfRendererMissingError` with one line
saying what to install. The page is self-contained: nothing is fetched while rendering.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from gpuwatch.core.install import install_hint


def _install_hint() -> str:
    return (
        f"PDF needs WeasyPrint and Pango: {install_hint('pdf')} "
        "(and on Debian: apt-get install libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0)"
    )


class PdfRendererMissingError(Exception):
    """No PDF renderer on this machine; the message says what to install."""


def _no_fetch(url: str, *_args: Any, **_kwargs: Any) -> dict[str, Any]:
    """WeasyPrint's URL fetcher: the page is self-contained, so nothing is fetched."""
    raise ValueError(f"the report fetches nothing ({url!r})")


def check_renderer() -> Any:
    """The weasyprint module; raises PdfRendererMissingError when it cannot be used."""
    try:
        with warnings.catch_warnings():  # "HarfBuzz-Subset will be required" on old hosts
            warnings.simplefilter("ignore", DeprecationWarning)
            # lazy: weasyprint (optional, heavy) only for the PDF format
            import weasyprint  # noqa: PLC0415
    except ImportError as exc:
        raise PdfRendererMissingError(f"{_install_hint()} ({exc})") from None
    except OSError as exc:  # WeasyPrint found, its system libraries not
        raise PdfRendererMissingError(f"{_install_hint()} ({exc})") from None
    for name in ("weasyprint", "fontTools"):  # their INFO/WARNING lines are not ours
        logging.getLogger(name).setLevel(logging.ERROR)
    return weasyprint


def render_pdf(page: str) -> bytes:
    """The HTML `page` as PDF bytes; raises PdfRendererMissingError without WeasyPrint."""
    weasyprint = check_renderer()
    document = weasyprint.HTML(string=page, url_fetcher=_no_fetch)
    return bytes(document.write_pdf())
