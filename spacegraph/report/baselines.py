"""Published baselines (``reports/baselines/*.yaml``): figures from papers and RLlib, with their source,
table or figure, hardware and what exactly was measured. They are drawn beside ours, labelled as
other hardware, and never enter a same-machine ratio.

File format::

    source: RLgraph paper (Schaarschmidt et al., MLSys 2019)
    url: https://arxiv.org/abs/1810.09028
    baselines:
      - scenario: build                # the report scenario it is drawn beside
        label: RLgraph, TF 1.11
        where: Section 5.1, Figure 5a (text)
        hardware: ...
        measured: ...
        unit: ms
        panel: ""                      # optional: the panel's title ("" = the first); plot: false = table only
        points: [{x: DQN agent, y: 1000, note: about 1 s}]   # bound: upper / lower where the source gives one
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from harness.measure.figures import Baseline

#: The checkout's baseline folder (a report run outside a checkout passes ``--baselines DIR``).
BASELINE_DIR = Path(__file__).resolve().parents[2] / "reports" / "baselines"


def default_dir() -> Path | None:
    """The checkout's `BASELINE_DIR`, else ``reports/baselines`` under the current directory (an installed
    package run from a clone, as tox does), else None."""
    for folder in (BASELINE_DIR, Path.cwd() / "reports" / "baselines"):
        if folder.is_dir():
            return folder
    return None
_REQUIRED = ("scenario", "label", "where", "hardware", "measured", "points")


def load(folder: str | Path | None = None) -> dict[str, list[Baseline]]:
    """``{scenario: [Baseline, ...]}`` from every ``*.yaml`` in ``folder`` (default: `default_dir`; {} when
    there is none or it does not exist).

    Entries with ``plot: false`` get the panel name ``"(table only)"``, which no plot draws.

    Raises:
        ValueError: naming the file (and entry) when it is not YAML text, not a mapping, a field is missing or a
            point has no ``y``.
    """
    out: dict[str, list[Baseline]] = {}
    folder = default_dir() if folder is None else Path(folder)
    if folder is None or not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.yaml")):
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, RecursionError, yaml.YAMLError) as exc:
            raise ValueError(f"{path}: cannot read it as YAML ({type(exc).__name__}: {exc})") from None
        if not isinstance(doc, dict):
            raise ValueError(f"{path}: expected a mapping at the top, got {type(doc).__name__}")
        source = doc.get("source")
        if not source:
            raise ValueError(f"{path}: needs a top-level 'source'")
        cite = f"{source}, {doc['url']}" if doc.get("url") else str(source)
        for i, entry in enumerate(doc.get("baselines") or []):
            if not isinstance(entry, dict):
                raise ValueError(f"{path}: baselines[{i}] is {str(entry)[:40]!r}, expected a mapping")
            missing = [k for k in _REQUIRED if k not in entry]
            if missing:
                raise ValueError(f"{path}: baselines[{i}] lacks {', '.join(missing)}")
            if not isinstance(entry["points"] or [], list):
                raise ValueError(f"{path}: baselines[{i}].points is {str(entry['points'])[:40]!r}, expected a list")
            points: list[dict[str, Any]] = list(entry["points"] or [])
            for j, p in enumerate(points):
                if not isinstance(p, dict) or not isinstance(p.get("y"), (int, float)):
                    raise ValueError(f"{path}: baselines[{i}].points[{j}] needs a numeric 'y'")
            panel = "(table only)" if entry.get("plot") is False else str(entry.get("panel", ""))
            url = entry.get("url")
            out.setdefault(entry["scenario"], []).append(Baseline(
                label=str(entry["label"]), source=f"{cite} ({url})" if url else cite, where=str(entry["where"]),
                hardware=str(entry["hardware"]), measured=str(entry["measured"]), points=points, panel=panel,
                unit=str(entry.get("unit", ""))))
    return out
