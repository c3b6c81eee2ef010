"""report.html opened in real headless Chromium: every chart is drawn by Vega (SVG marks in the
DOM) with no network, and the screenshot is not a blank page.

Chromium comes from the Debian package `chromium` (`make test` installs it when it can, see the
Makefile's `browser` target); without it the two tests that open the page skip and say so. docs/report.png was taken with the same
flags and window as `test_screenshot_is_not_blank` (pytest -s prints where its copy lands)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pipelines.reports.text import CHARTS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Only the tests that open the page need a browser (test_report_is_self_contained reads the file).
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH: `make browser`"
                                    " (root, Debian) or `apt-get install chromium` installs it")
WIDTH, HEIGHT = 1200, 5000


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium with no network side-traffic and a throwaway profile."""
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=15000", *args],
        capture_output=True, text=True, timeout=120, check=True)


class ChartMarks(HTMLParser):
    """Counts, inside each <div id="chart-...">, the SVG elements Vega drew."""

    def __init__(self):
        super().__init__()
        self.stack: list[str | None] = []
        self.marks: dict[str, int] = {}
        self.svgs: dict[str, int] = {}

    def handle_starttag(self, tag, attrs):
        ident = dict(attrs).get("id") or ""
        chart = ident.removeprefix("chart-") if ident.startswith("chart-") else None
        inside = chart or next((c for c in reversed(self.stack) if c), None)
        if inside:
            if tag == "svg":
                self.svgs[inside] = self.svgs.get(inside, 0) + 1
            if tag in ("path", "rect", "line", "text", "circle"):
                self.marks[inside] = self.marks.get(inside, 0) + 1
        if tag not in ("br", "img", "meta", "input", "hr", "link"):
            self.stack.append(chart)

    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def page(demo_run) -> Path:
    return demo_run / "reports" / "report.html"


def test_report_is_self_contained(page):
    text = page.read_text()
    assert 'src="http' not in text and "src='http" not in text and "<link" not in text
    assert text.count("vegaEmbed('#chart-") == len(CHARTS)


@needs_chromium
def test_every_chart_is_drawn_by_vega(page, tmp_path):
    dom = chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    parser = ChartMarks()
    parser.feed(dom)
    assert set(parser.svgs) == set(CHARTS), f"charts without SVG: {set(CHARTS) - set(parser.svgs)}"
    thin = {c: n for c, n in parser.marks.items() if n < 30}
    assert not thin, f"charts with hardly any marks drawn: {thin}"
    assert "Decode owns" in dom


@needs_chromium
def test_screenshot_is_not_blank(page, tmp_path):
    shot, blank = tmp_path / "report.png", tmp_path / "blank.png"
    empty = tmp_path / "empty.html"
    empty.write_text("<!DOCTYPE html><html><body></body></html>")
    for target, out in ((page, shot), (empty, blank)):
        chromium(tmp_path, f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={out}", target.as_uri())
    assert png_size(shot) == png_size(blank) == (WIDTH, HEIGHT)
    # A blank page compresses to a few KB; text, tables and five charts cannot.
    assert shot.stat().st_size > 10 * blank.stat().st_size
    print(f"screenshot: {shot}")


# Runs in the page after it is laid out: each what-if table row's scenario name and the number of
# lines it is drawn on.
LINES_PROBE = ("<script>document.body.dataset.lines = [...document.querySelectorAll("
               "'table.t-scenario td:first-child')].map(td => {const r = document.createRange();"
               " r.selectNodeContents(td); return td.textContent + ':' + r.getClientRects().length;})"
               ".join(',');</script>")


@needs_chromium
def test_a_scenario_name_is_not_broken_across_lines(page, tmp_path):
    """The what-if table's scenario names broke at their hyphens ('prefix-' over 'cache',
    'output-cap-' over '256', 'max-batch-' over '32'), so a name's number read as a figure of
    its own; each is one line."""
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", LINES_PROBE + "</body>"))
    dom = chromium(tmp_path, f"--window-size={WIDTH},{HEIGHT}", "--dump-dom", probe.as_uri()).stdout
    names = dict(item.rsplit(":", 1) for item in re.search(r'data-lines="([^"]*)"', dom)[1].split(","))
    assert "output-cap-256" in names and {n for n, lines in names.items() if lines != "1"} == set()
