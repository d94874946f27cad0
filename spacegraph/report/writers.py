"""Writing a `Report`: ``report.md``, ``report.html`` (one self-contained file), ``report.json``, a PNG and
CSV files per figure, and ``headline.csv`` (every same-run ratio with its target)."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path
from typing import Any

from harness.measure import html
from harness.measure.figures import RATIO_HEADER, figure_markdown, plot_figure, ratio_cells, write_csv
from harness.measure.tables import markdown_table
from spacegraph.report.runner import Report

HEADLINE_HEADER = ["figure", *RATIO_HEADER]


def headline_rows(report: Report) -> list[list[str]]:
    """One row per same-run ratio of every figure: figure, ratio, ours, peer, value, target, verdict."""
    return [[f.figure_ref, *ratio_cells(r)] for f in report.figures for r in f.ratios]


def summary_items(report: Report) -> list[tuple[str, str]]:
    """The run's facts as ``(key, value)`` lines."""
    m = report.machine
    if "description" in m:  # drawn from a measured result (--from-json): the machine as the result records it
        machine = str(m["description"])
    else:
        gpu = "; ".join(m["gpus"]) if m.get("gpus") else "none"
        machine = (f"{m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB memory, GPU: {gpu}, {m['os']}, "
                   f"Python {m['python']}")
    load = "not recorded" if not report.load_before else (
        f"before {' / '.join(f'{x:.2f}' for x in report.load_before)}, after "
        f"{' / '.join(f'{x:.2f}' for x in report.load_after)}, highest 1-min seen {report.max_load:.2f}")
    items = [("command (from a fresh clone)", report.command), ("git revision", report.revision),
             ("started", report.started), ("duration", f"{report.seconds / 60:.1f} min ({report.seconds:.0f} s)"),
             ("mode", "quick" if report.quick else "full"), ("seeds", str(report.seeds)),
             ("machine", machine), ("load average (1/5/15 min)", load),
             ("versions", ", ".join(f"{k} {v}" for k, v in report.versions.items() if v)),
             ("peers (RLlib)", report.peers_note or "measured in this run"),
             ("published baselines", report.baselines_note or "reports/baselines (other hardware)")]
    return items


def markdown(report: Report, pngs: dict[str, str]) -> str:
    """The whole report as Markdown (plots linked by file name)."""
    lines = ["# spacegraph report", ""]
    lines += [f"- **{k}**: {v}" for k, v in summary_items(report)]
    if report.load_warning:
        lines += ["", f"> **Load warning**: {report.load_warning}."]
    lines += ["", "Ratios are taken from measurements of this run, interleaved (ours, peer, ours, peer ...). "
                  "Published figures (reports/baselines) are other hardware: drawn beside ours, never in a ratio.",
              "", "## Headline", ""]
    rows = headline_rows(report)
    lines += [markdown_table(HEADLINE_HEADER, rows) if rows else "(no same-run ratios in this run)", ""]
    lines += [f"- [{f.title}](#{f.name}) ({f.figure_ref})" for f in report.figures]
    lines.append("")
    for fig in report.figures:
        lines += [f'<a id="{fig.name}"></a>', "", figure_markdown(fig, pngs.get(fig.name))]
    return "\n".join(lines)


def html_page(report: Report, png_bytes: dict[str, bytes]) -> str:
    """The whole report as one self-contained HTML document (plots embedded)."""
    body = [html.meta_list(summary_items(report))]
    if report.load_warning:
        body.append(f'<p class="warn"><b>Load warning</b>: {html.esc(report.load_warning)}.</p>')
    body.append("<p>Ratios are taken from measurements of this run, interleaved (ours, peer, ours, peer ...). "
                "Published figures are other hardware: drawn beside ours, never in a ratio.</p><h2>Headline</h2>")
    rows = headline_rows(report)
    body.append(html.table(HEADLINE_HEADER, rows, {"met": "met", "missed": "missed"}) if rows
                else "<p>(no same-run ratios in this run)</p>")
    body.append("<ul>" + "".join(f'<li><a href="#{html.esc(f.name)}">{html.esc(f.title)}</a> '
                                 f"({html.esc(f.figure_ref)})</li>" for f in report.figures) + "</ul>")
    body += [html.figure_section(f, png_bytes.get(f.name)) for f in report.figures]
    return html.page("spacegraph report", body)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


def write(report: Report, out_dir: str | Path) -> dict[str, Path]:
    """Writes every file into ``out_dir`` (created); the JSON first, so the raw numbers survive a failing plot.

    Returns:
        ``{"md", "html", "json", "headline_csv", <figure name>_png, <figure name>_csv...}``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {"json": out / "report.json"}
    paths["json"].write_text(json.dumps(_jsonable(dataclasses.asdict(report)), indent=1) + "\n")
    pngs, png_bytes = {}, {}
    for fig in report.figures:
        png = out / f"{fig.name}.png"
        if plot_figure(fig, png):
            pngs[fig.name], png_bytes[fig.name] = png.name, png.read_bytes()
            paths[f"{fig.name}_png"] = png
        for i, p in enumerate(write_csv(fig, out)):
            paths[f"{fig.name}_csv{i}"] = p
    paths["headline_csv"] = out / "headline.csv"
    with open(paths["headline_csv"], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADLINE_HEADER)
        w.writerows(headline_rows(report))
    paths["md"] = out / "report.md"
    paths["md"].write_text(markdown(report, pngs))
    paths["html"] = out / "report.html"
    paths["html"].write_text(html_page(report, png_bytes))
    return paths
