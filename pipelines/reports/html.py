"""report.html: the report's blocks (pipelines/reports/text.py) as one self-contained page.

The Vega, Vega-Lite and vega-embed libraries are inlined once (from vl-convert's bundle, the one
Altair inlines in a single chart's HTML) and every chart's Vega-Lite spec is embedded, so the page
renders with no network and each chart stays interactive (tooltips)."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence

import altair as alt
import vl_convert

from pipelines.reports.text import CHARTS, ReportTables, report_blocks, table_rows

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { margin-bottom: .3em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 13px; margin: 1em 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: right; }
th { background: #f4f4f4; } td:nth-child(2) { text-align: left; white-space: nowrap; }
table.t-scenario td:nth-child(2) { white-space: normal; min-width: 16em; }
table.t-scenario td:first-child { white-space: nowrap; }
code { background: #f4f4f4; padding: 0 3px; } .chart { margin: 1.5em 0; }
"""


def _inline(text: str) -> str:
    """Escape, then render **bold** and `code` as the markdown report does."""
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def _block(block: tuple) -> str:
    kind = block[0]
    if kind in ("h1", "h2", "p"):
        return f"<{kind}>{_inline(block[1])}</{kind}>"
    if kind == "ul":
        return "<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in block[1]) + "</ul>"
    if kind == "table":
        head = "".join(f"<th>{html.escape(c)}</th>" for c in block[2].values())
        rows = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in cells) + "</tr>"
                       for cells in table_rows(block[1], block[2]))
        first = next(iter(block[2]))  # the table's first column names its style (t-rank, t-scenario)
        return f'<table class="t-{first}"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    stem = block[1]
    return f'<div class="chart" id="chart-{stem}" role="img" aria-label="{html.escape(CHARTS[stem])}"></div>'


def report_html(t: ReportTables, deployment: str, specs: dict[str, dict],
                caveats: Sequence[tuple[str, str]] = (), unserved: Sequence[tuple] = (),
                other_models: Sequence[str] = (), copies: Sequence[str] = (),
                prices: Sequence[tuple] = (), incomplete: Sequence[tuple] = (),
                failed: Sequence[tuple] = ()) -> str:
    """The whole page; `specs` maps each chart stem of text.CHARTS to its Vega-Lite spec (as
    charts.save_chart saved it); `caveats`, `unserved`, `other_models`, `copies`, `prices`,
    `incomplete` and `failed` as in text.report_blocks."""
    vl_version = "v" + "_".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    blocks = report_blocks(t, deployment, caveats, unserved, other_models, copies, prices,
                           incomplete, failed)
    # only the charts the report shows (no what-if chart where no scenario was replayed)
    shown = {b[1] for b in blocks if b[0] == "chart"}
    # A spec is JSON inside <script>: "</" is escaped so no label can close the tag.
    embedded = {stem: json.dumps(spec).replace("</", "<\\/")
                for stem, spec in specs.items() if stem in shown}
    embed = "\n".join(f"vegaEmbed('#chart-{stem}', {spec}, {{renderer: 'svg', actions: false}})"
                      f".catch(console.error);" for stem, spec in embedded.items())
    body = "\n".join(_block(b) for b in blocks)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<title>fleetspend report</title>"
        f"<style>{_STYLE}</style>"
        f"<script>{vl_convert.javascript_bundle(vl_version=vl_version)}</script>"
        f"</head><body>\n{body}\n<script>\n{embed}\n</script></body></html>\n"
    )
