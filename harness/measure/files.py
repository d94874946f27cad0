"""Plotting for reports: ``matplotlib.pyplot`` on the non-interactive Agg backend (`pyplot`)."""

from __future__ import annotations

from typing import Any


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
