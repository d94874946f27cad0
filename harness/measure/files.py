"""Writing a report's three files: ``<stem>.json`` (raw numbers), ``<stem>.png`` and ``<stem>.md``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable


def pyplot(owner: str) -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend.

    Raises:
        ImportError: naming ``owner`` (the report's plot function) when matplotlib is missing.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(f"{owner} needs matplotlib (a dependency of spacegraph): pip install matplotlib") from exc
    return plt


def write_report(result: dict[str, Any], out_dir: str | Path, stem: str, markdown: Callable[[dict], str],
                 plot: Callable[[dict, Path], None]) -> dict[str, Path]:
    """Writes the JSON first (the raw numbers survive a failing plot), then the PNG and the Markdown.

    Returns:
        ``{"md": path, "png": path, "json": path}``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"md": out / f"{stem}.md", "png": out / f"{stem}.png", "json": out / f"{stem}.json"}
    paths["json"].write_text(json.dumps(result, indent=2) + "\n")
    plot(result, paths["png"])
    paths["md"].write_text(markdown(result))
    return paths
