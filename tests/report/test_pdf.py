"""The PDF through the real renderer (WeasyPrint), read back with poppler's tools."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpuwatch.report.build import build_report
from gpuwatch.report.html import render_html
from gpuwatch.report.pdf import render_pdf
from tests.report.data import sample_data


def _ppm_pixels(path: Path) -> tuple[int, int, bytes]:
    """Width, height and RGB bytes of a binary PPM (P6) file."""
    raw = path.read_bytes()
    fields = raw.split(maxsplit=4)
    assert fields[0] == b"P6"
    width, height, depth = int(fields[1]), int(fields[2]), int(fields[3])
    assert depth == 255
    return width, height, fields[4][-width * height * 3 :]


def test_pdf_renders_the_page_with_its_charts(tmp_path: Path) -> None:
    data = sample_data(host_a="<script>alert(1)</script>")
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(render_pdf(render_html(build_report(data))))
    assert pdf.read_bytes().startswith(b"%PDF-")
    text = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], check=True, capture_output=True, text=True
    ).stdout
    assert "GPU cost report" in text
    assert "$187.20" in text
    assert "<script>alert(1)</script>" in text  # the name, as text
    subprocess.run(
        [
            "pdftoppm",
            "-r",
            "40",
            "-f",
            "1",
            "-l",
            "1",
            "-singlefile",
            str(pdf),
            str(tmp_path / "page"),
        ],
        check=True,
    )
    width, height, pixels = _ppm_pixels(tmp_path / "page.ppm")
    assert width > 200
    assert height > 300
    colors = {pixels[i : i + 3] for i in range(0, len(pixels), 3)}

    # the chart colours are on the page: idle (orange), held (red), other (blue)
    def near(rgb: tuple[int, int, int]) -> bool:
        return any(all(abs(c[k] - rgb[k]) < 24 for k in range(3)) for c in colors)

    assert near((0xE8, 0xA3, 0x3D))
    assert near((0xC4, 0x46, 0x3A))
    assert near((0x4A, 0x7F, 0xB5))
