"""One self-contained HTML report: inline CSS, PNG plots embedded as base64 data URIs, no external links needed.

The page is built from the same data as the Markdown report (`harness.measure.figures`), not converted
from Markdown: `table` and `figure_section` give fragments, `page` wraps them.
"""

from __future__ import annotations

import base64
import html
from typing import Any, Sequence

from harness.measure.figures import (BASELINE_HEADER, RATIO_HEADER, Figure, baseline_rows, fmt, ratio_cells)

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;
color:#222;line-height:1.4;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.85em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}th{background:#f3f3f3}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto}code{font-family:ui-monospace,Menlo,Consolas,monospace}
.warn{background:#fff4e5;border-left:4px solid #f0a020;padding:.4em .8em}
.met{color:#17702b}.missed{color:#b00020}img{max-width:100%;border:1px solid #eee}
ul.meta{font-size:.85em;color:#444}
"""


def esc(value: Any) -> str:
    """``value`` as escaped HTML text."""
    return html.escape(str(value))


def data_uri(png: bytes) -> str:
    """``data:image/png;base64,...`` for PNG bytes."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def table(header: Sequence[Any], rows: Sequence[Sequence[Any]], cell_class: dict[str, str] | None = None) -> str:
    """An HTML table; a cell whose text is a key of ``cell_class`` gets that CSS class."""
    cell_class = cell_class or {}
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for c in row:
            text = fmt(c)
            cls = cell_class.get(text)
            cells.append(f'<td class="{cls}">{esc(text)}</td>' if cls else f"<td>{esc(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def meta_list(items: Sequence[tuple[str, Any]]) -> str:
    """A ``<ul>`` of ``key: value`` lines (empty values left out)."""
    lis = "".join(f"<li><b>{esc(k)}</b>: {esc(v)}</li>" for k, v in items if v)
    return f'<ul class="meta">{lis}</ul>' if lis else ""


def figure_section(fig: Figure, png: bytes | None) -> str:
    """A figure's ``<section>``: title, reproduce command, meta, the embedded plot, ratios, tables, baselines, notes."""
    meta = fig.meta
    parts = [f'<section id="{esc(fig.name)}"><h2>{esc(fig.title)} ({esc(fig.figure_ref)})</h2>']
    if meta.get("command"):
        parts.append(f"<p>Reproduce (from a fresh clone):</p><pre><code>{esc(meta['command'])}</code></pre>")
    parts.append(meta_list([(k, meta.get(k)) for k in ("revision", "machine", "load", "versions", "duration",
                                                       "rendered from")]))
    if fig.headline:
        parts.append(f"<p><b>Result</b>: {esc(fig.headline)}</p>")
    if meta.get("load_warning"):
        parts.append(f'<p class="warn"><b>load warning</b>: {esc(meta["load_warning"])}</p>')
    if fig.peer_missing:
        parts.append(f'<p class="warn"><b>peer missing</b>: {esc(fig.peer_missing)}</p>')
    if png:
        parts.append(f'<p><img alt="{esc(fig.title)}" src="{data_uri(png)}"></p>')
    if fig.ratios:
        parts.append("<p>Ratios (measured in this run, interleaved):</p>")
        parts.append(table(RATIO_HEADER, [ratio_cells(r) for r in fig.ratios], {"met": "met", "missed": "missed"}))
    for t in fig.tables:
        parts.append(f"<p>{esc(t.title)}:</p>" + table(t.header, t.rows))
    if fig.baselines:
        parts.append("<p>Published figures (other hardware; drawn beside ours, never in a ratio):</p>")
        parts.append(table(BASELINE_HEADER, baseline_rows(fig.baselines)))
    if fig.notes:
        parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in fig.notes) + "</ul>")
    parts.append("</section>")
    return "\n".join(parts)


def page(title: str, body: Sequence[str]) -> str:
    """A complete HTML document with the inline stylesheet around the ``body`` fragments."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{_CSS}</style></head>\n<body>\n<h1>{esc(title)}</h1>\n"
            + "\n".join(body) + "\n</body></html>\n")
