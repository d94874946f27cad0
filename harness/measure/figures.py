"""Report figures as data: tables, plotted series, same-run ratios and published baselines, and their writers.

A `Figure` is what one report scenario produces: Markdown-ready `Table`s, `Series` drawn on
one or more `Panel`s, `Ratio`s computed from measurements taken in the same run, notes, and
`Baseline`s (published numbers from other hardware, drawn beside ours and never used in a
ratio). This module knows nothing of what was measured; it writes a figure as Markdown
(`figure_markdown`), CSV (`write_csv`) and a PNG (`plot_figure`).
"""

from __future__ import annotations

import csv
import dataclasses
import math
import statistics
from pathlib import Path
from typing import Any, Sequence

from harness.measure.files import pyplot
from harness.measure.tables import markdown_table

#: Two-sided 95% Student-t quantiles by degrees of freedom (1..30); beyond 30 the normal 1.96.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def mean_ci95(values: Sequence[float]) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean and its two-sided 95% Student-t interval (one value: a zero-width one).

    Raises:
        ValueError: for no values.
    """
    vals = [float(v) for v in values]
    if not vals:
        raise ValueError("mean_ci95: needs at least one value")
    mean = statistics.fmean(vals)
    if len(vals) == 1:
        return mean, mean, mean
    df = len(vals) - 1
    half = (_T95[df - 1] if df <= len(_T95) else 1.96) * statistics.stdev(vals) / math.sqrt(len(vals))
    return mean, mean - half, mean + half


@dataclasses.dataclass
class Table:
    """A titled table: ``header`` and ``rows`` of cells (written as ``str()`` gives them)."""

    title: str
    header: list[str]
    rows: list[list[Any]]


@dataclasses.dataclass
class Series:
    """One line (or one group of bars) on a panel.

    Args:
        label: the legend entry.
        x: x values (on a panel with categories: the category names).
        y: y values.
        lo, hi: a band around ``y`` (e.g. a 95% interval), or None.
        side: ``"ours"``, ``"peer"`` (measured in the same run) or ``"reference"`` (e.g. raw env stepping).
        panel: the `Panel` it is drawn on (its title).
    """

    label: str
    x: list[Any]
    y: list[float | None]
    lo: list[float | None] | None = None
    hi: list[float | None] | None = None
    side: str = "ours"
    panel: str = ""


@dataclasses.dataclass
class Panel:
    """One plot area: axis labels, log axes, and ``categories`` for a bar chart (None: lines)."""

    title: str
    x_label: str = ""
    y_label: str = ""
    x_log: bool = False
    y_log: bool = False
    categories: list[str] | None = None


@dataclasses.dataclass
class Ratio:
    """A ratio of two measurements taken in the same run (``ours / peer`` unless the name says otherwise).

    ``target`` is e.g. ``">= 0.95"``; ``met`` is None when there is no target or no value; ``verdict``
    ("met", "missed", "undetermined") overrides the comparison where the value is only a bound.
    """

    name: str
    value: float | None
    ours: str = ""
    peer: str = ""
    target: str | None = None
    note: str = ""
    verdict: str | None = None

    @property
    def met(self) -> bool | None:
        """Whether ``value`` meets ``target`` (``"< x"``, ``"<= x"``, ``"> x"``, ``">= x"``)."""
        if self.verdict is not None:
            return {"met": True, "missed": False}.get(self.verdict)
        if self.value is None or not self.target:
            return None
        op, _, bound = self.target.strip().partition(" ")
        b = float(bound)
        return {"<": self.value < b, "<=": self.value <= b, ">": self.value > b, ">=": self.value >= b}[op]


@dataclasses.dataclass
class Baseline:
    """A published number (other hardware): drawn beside ours, never part of a same-machine ratio.

    Args:
        label: the legend entry (the runner adds "other hardware").
        source: citation and URL.
        where: table or figure of the source.
        hardware: the hardware it was measured on, as the source states it.
        measured: what exactly was measured.
        points: ``[{"x": ..., "y": ..., "bound": "upper"|"lower"|None, "note": ...}]``; ``x`` None means "at
            no stated x" (drawn as a horizontal line); a category name on a bar panel.
        panel: the panel it is drawn on (its title); "" means the figure's first panel.
        unit: the unit of ``y``.
    """

    label: str
    source: str
    where: str
    hardware: str
    measured: str
    points: list[dict[str, Any]]
    panel: str = ""
    unit: str = ""


@dataclasses.dataclass
class Figure:
    """What one scenario produced (see the module docstring).

    ``meta`` holds command, revision and machine; ``raw`` the measured result the scenario rendered (from which
    ``spacegraph report --from-json`` renders it again); ``headline`` its one-line result for the front page.
    """

    name: str
    title: str
    figure_ref: str
    panels: list[Panel] = dataclasses.field(default_factory=list)
    series: list[Series] = dataclasses.field(default_factory=list)
    tables: list[Table] = dataclasses.field(default_factory=list)
    ratios: list[Ratio] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    baselines: list[Baseline] = dataclasses.field(default_factory=list)
    peer_missing: str | None = None
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    raw: dict[str, Any] = dataclasses.field(default_factory=dict)
    headline: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The figure as plain data (JSON-ready where the cells are)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Figure:
        """The figure `to_dict` wrote (unknown keys are ignored, so older JSON still reads).

        Raises:
            ValueError: when ``data`` is not a mapping or lacks ``name``, ``title`` or ``figure_ref``.
        """
        if not isinstance(data, dict) or any(k not in data for k in ("name", "title", "figure_ref")):
            raise ValueError(f"a figure needs 'name', 'title' and 'figure_ref'; got {str(data)[:80]!r}")
        parts = {"panels": Panel, "series": Series, "tables": Table, "ratios": Ratio, "baselines": Baseline}
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in fields}
        for key, kind in parts.items():
            kwargs[key] = [kind(**item) for item in data.get(key) or []]
        return cls(**kwargs)


def fmt(value: Any, digits: int = 3) -> str:
    """A cell: ``n/a`` for None, floats to ``digits`` significant digits (thousands separated), others as str."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if value == 0 or not math.isfinite(value):
            return f"{value:g}"
        if abs(value) >= 10 ** digits:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    return str(value)


def ratio_cells(r: Ratio) -> list[str]:
    """``[name, ours, peer, value, target, verdict]`` cells of a ratio."""
    verdict = r.verdict or {True: "met", False: "missed", None: ""}[r.met]
    value = fmt(r.value) + (f" ({r.note})" if r.note else "")
    return [r.name, r.ours, r.peer, value, r.target or "", verdict]


RATIO_HEADER = ["ratio", "ours", "peer", "value", "target", ""]


def baseline_rows(baselines: Sequence[Baseline]) -> list[list[str]]:
    """One row per baseline point: label, value, where, hardware, what was measured, source."""
    rows = []
    for b in baselines:
        for p in b.points:
            bound = {"upper": "< ", "lower": "> "}.get(p.get("bound") or "", "")
            at = "" if p.get("x") is None else f" at {p['x']}"
            rows.append([b.label + at, f"{bound}{fmt(p['y'])} {b.unit}".strip(), b.where, b.hardware, b.measured,
                         b.source])
    return rows


BASELINE_HEADER = ["published (other hardware)", "value", "where", "hardware", "what was measured", "source"]


def figure_markdown(fig: Figure, png: str | None, heading: str = "##") -> str:
    """A figure's Markdown section: title, meta, plot, tables, ratios, baselines and notes."""
    lines = [f"{heading} {fig.title} ({fig.figure_ref})", ""]
    meta = fig.meta
    if meta.get("command"):
        lines += ["Reproduce (from a fresh clone):", "", "```bash", meta["command"], "```", ""]
    for key in ("revision", "machine", "load", "versions", "duration", "rendered from"):
        if meta.get(key):
            lines.append(f"- {key}: {meta[key]}")
    if meta.get("load_warning"):
        lines.append(f"- **load warning**: {meta['load_warning']}")
    if fig.peer_missing:
        lines.append(f"- **peer missing**: {fig.peer_missing}")
    lines.append("")
    if fig.headline:
        lines += [f"**Result**: {fig.headline}", ""]
    if png:
        lines += [f"![{fig.title}]({png})", ""]
    if fig.ratios:
        lines += ["Ratios (measured in this run, interleaved):", "",
                  markdown_table(RATIO_HEADER, [ratio_cells(r) for r in fig.ratios]), ""]
    for table in fig.tables:
        lines += [f"{table.title}:", "", markdown_table(table.header, [[fmt(c) for c in row] for row in table.rows]),
                  ""]
    if fig.baselines:
        lines += ["Published figures (other hardware; drawn beside ours, never in a ratio):", "",
                  markdown_table(BASELINE_HEADER, baseline_rows(fig.baselines)), ""]
    lines += [f"- {note}" for note in fig.notes]
    return "\n".join(lines).rstrip() + "\n"


def write_csv(fig: Figure, out_dir: str | Path) -> list[Path]:
    """``<name>_<i>.csv`` per table and ``<name>_series.csv`` (series, side, panel, x, y, lo, hi); the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, table in enumerate(fig.tables):
        path = out / f"{fig.name}_{i}.csv"
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["# " + table.title])
            w.writerow(table.header)
            w.writerows(table.rows)
        paths.append(path)
    if fig.series:
        path = out / f"{fig.name}_series.csv"
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["series", "side", "panel", "x", "y", "lo", "hi"])
            for s in fig.series:
                for i, (x, y) in enumerate(zip(s.x, s.y)):
                    lo = s.lo[i] if s.lo else None
                    hi = s.hi[i] if s.hi else None
                    w.writerow([s.label, s.side, s.panel, x, y, lo, hi])
        paths.append(path)
    return paths


_STYLE = {"ours": {"linestyle": "-", "marker": "o"}, "peer": {"linestyle": "--", "marker": "s"},
          "reference": {"linestyle": ":", "marker": "^"}}


def plot_figure(fig: Figure, path: str | Path) -> bool:
    """Draws the figure's panels into ``path`` (PNG); baselines dashed/hatched and labelled "other hardware".

    Returns:
        False (and writes nothing) when the figure has neither series nor baselines with values.
    """
    panels = list(fig.panels) or [Panel(title="")]
    titles = {p.title for p in panels}
    drawable = [b for b in fig.baselines if b.points and (b.panel or panels[0].title) in titles]
    if not fig.series and not drawable:
        return False
    plt = pyplot("harness.measure.figures.plot_figure")
    width = 6.0 * len(panels)
    figure, axes = plt.subplots(1, len(panels), figsize=(width, 4.2), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        own = [s for s in fig.series if (s.panel or panels[0].title) == panel.title]
        base = [b for b in drawable if (b.panel or panels[0].title) == panel.title]
        if panel.categories is not None:
            _bars(ax, panel, own, base)
        else:
            _lines(ax, own, base)
            if panel.x_log:
                ax.set_xscale("log", base=2)
        if panel.y_log:
            ax.set_yscale("log")
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel(panel.x_label)
        ax.set_ylabel(panel.y_label)
        ax.grid(True, alpha=0.3)
        if own or base:
            ax.legend(fontsize=7)
    figure.suptitle(f"{fig.title} ({fig.figure_ref})", fontsize=11)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return True


def _lines(ax: Any, series: list[Series], baselines: list[Baseline]) -> None:
    for s in series:
        pts = [(x, y) for x, y in zip(s.x, s.y) if y is not None]
        if not pts:
            continue
        line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], label=s.label, **_STYLE.get(s.side, {}))
        if s.lo and s.hi:
            band = [(x, lo, hi) for x, lo, hi in zip(s.x, s.lo, s.hi) if lo is not None and hi is not None]
            ax.fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band], alpha=0.2,
                            color=line.get_color())
    for b in baselines:
        at_x = [p for p in b.points if p.get("x") is not None]
        if at_x:
            ax.plot([p["x"] for p in at_x], [p["y"] for p in at_x], linestyle="-.", marker="x", color="grey",
                    label=f"{b.label} (other hardware)")
        for p in b.points:
            if p.get("x") is None:
                ax.axhline(p["y"], linestyle="-.", color="grey", alpha=0.7)
                ax.annotate(f"{b.label} (other hardware)", (0.01, p["y"]), xycoords=("axes fraction", "data"),
                            fontsize=7, color="grey", va="bottom")


def _bars(ax: Any, panel: Panel, series: list[Series], baselines: list[Baseline]) -> None:
    cats = list(panel.categories or [])
    groups = len(series) + len(baselines)
    width = 0.8 / max(groups, 1)
    for i, s in enumerate(series):
        values = dict(zip(s.x, s.y))
        xs = [j + i * width for j, c in enumerate(cats) if values.get(c) is not None]
        ys = [values[c] for c in cats if values.get(c) is not None]
        ax.bar(xs, ys, width, label=s.label)
    for k, b in enumerate(baselines):
        i = len(series) + k
        pts = {p.get("x"): p for p in b.points}
        xs = [j + i * width for j, c in enumerate(cats) if c in pts]
        ys = [pts[c]["y"] for c in cats if c in pts]
        ax.bar(xs, ys, width, label=f"{b.label} (other hardware)", hatch="//", fill=False, edgecolor="grey")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cats))])
    ax.set_xticklabels(cats, fontsize=7, rotation=15)
