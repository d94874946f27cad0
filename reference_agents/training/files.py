"""A run directory's files: metrics (CSV and JSON lines), finished episodes (CSV) and the learning curve (PNG).

Whole files are replaced atomically (`rewrite_run_files`, `plot_learning_curve`); rows are
appended and flushed one evaluation at a time (`append_metric_row`, `append_episodes`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from typing import Any

import numpy as np

from harness.execution.serialization import atomic_file

#: The learning diagnostics of a metric row: means over the updates since the previous row of the policy's entropy
#: (nats), the gradient norm (before clipping) and the policy lag (updates between the weights that acted and the
#: update that learned from them: distributed IMPALA); empty for an agent or worker that does not report one.
LEARNER_COLUMNS = ("policy_entropy", "grad_norm", "policy_lag")
METRIC_COLUMNS = ("env_steps", "frames", "wall_s", "train_s", "eval_s", "steps_per_s", "frames_per_s", "episodes",
                  "train_return_100", "eval_return", "eval_episodes", "screen_return", "solved", "epsilon", "updates",
                  "last_loss", *LEARNER_COLUMNS)
EPISODE_COLUMNS = ("episode", "env_id", "return", "length", "terminated", "truncated", "end_step", "end_frame")
METRICS_CSV, METRICS_JSONL, EPISODES_CSV = "metrics.csv", "metrics.jsonl", "episodes.csv"
LEARNING_CURVE = "learning_curve.png"


def format_number(value: Any, digits: int = 1) -> str:
    """A number for people: ``-`` for None/NaN."""
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def as_float(value: Any) -> float:
    """``value`` as a float, NaN for None."""
    return math.nan if value is None else float(value)


def json_scalar(value: Any) -> Any:
    """A JSON-safe scalar: NaN and infinities become None, NumPy scalars Python ones."""
    if isinstance(value, (np.generic,)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _file_mode() -> int:
    """The mode ``open`` gives new files under the current umask (``mkstemp`` files are 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _atomic_write(path: str, text: str) -> None:
    with atomic_file(path, "w", permissions=_file_mode()) as fh:
        fh.write(text)


def _csv_text(columns: tuple[str, ...], rows: list[dict[str, Any]], header: bool) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if header:
        writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if json_scalar(row.get(c)) is None else json_scalar(row.get(c)) for c in columns])
    return buf.getvalue()


def _episode_rows(episodes: list[Any], first_index: int) -> list[dict[str, Any]]:
    return [{"episode": first_index + i, "env_id": e.env_id, "return": e.episode_return, "length": e.length,
             "terminated": int(e.terminated), "truncated": int(e.truncated), "end_step": e.end_step,
             "end_frame": e.end_frame} for i, e in enumerate(episodes)]


def _metrics_jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps({k: json_scalar(r.get(k)) for k in METRIC_COLUMNS}) + "\n" for r in rows)


def rewrite_run_files(out_dir: str, history: list[dict[str, Any]], episodes: list[Any]) -> int:
    """Makes the metric and episode files of ``out_dir`` hold exactly ``history`` and ``episodes``
    (no rows beyond them); returns the number of episodes written."""
    _atomic_write(os.path.join(out_dir, METRICS_CSV), _csv_text(METRIC_COLUMNS, history, header=True))
    _atomic_write(os.path.join(out_dir, METRICS_JSONL), _metrics_jsonl(history))
    _atomic_write(os.path.join(out_dir, EPISODES_CSV),
                  _csv_text(EPISODE_COLUMNS, _episode_rows(episodes, 0), header=True))
    return len(episodes)


def _append(path: str, text: str) -> None:
    with open(path, "a", newline="") as fh:
        fh.write(text)
        fh.flush()


def append_metric_row(out_dir: str, row: dict[str, Any]) -> None:
    """Appends one metrics row to ``metrics.csv`` and ``metrics.jsonl`` (flushed)."""
    _append(os.path.join(out_dir, METRICS_CSV), _csv_text(METRIC_COLUMNS, [row], header=False))
    _append(os.path.join(out_dir, METRICS_JSONL), _metrics_jsonl([row]))


def append_episodes(out_dir: str, episodes: list[Any], first_index: int) -> None:
    """Appends finished episodes to ``episodes.csv``, numbered from ``first_index`` (flushed)."""
    _append(os.path.join(out_dir, EPISODES_CSV), _csv_text(EPISODE_COLUMNS, _episode_rows(episodes, first_index),
                                                           header=False))


def plot_learning_curve(path: str, episodes: list[Any], history: list[dict[str, Any]],
                        target_return: float | None = None, title: str = "") -> bool:
    """Writes a PNG of training returns per episode and evaluation means against env steps (atomically).

    Args:
        path: the PNG to write.
        episodes: finished `Episode`s (their ``end_step`` and ``episode_return``).
        history: metric rows (``env_steps``, ``eval_return``).
        target_return: drawn as a dashed line if given.
        title: the plot's title.

    Returns:
        False (and writes nothing) when matplotlib is not installed.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return False
    fig = Figure(figsize=(8, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    if episodes:
        steps = np.array([e.end_step for e in episodes], np.float64)
        returns = np.array([e.episode_return for e in episodes], np.float64)
        ax.plot(steps, returns, ".", ms=2, alpha=0.35, color="tab:blue", label="training episode return")
        window = min(100, len(returns))
        smooth = np.convolve(returns, np.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1:], smooth, color="tab:blue", lw=1.5, label=f"mean of last {window} episodes")
    evals = [(r["env_steps"], r["eval_return"]) for r in history if json_scalar(r.get("eval_return")) is not None]
    if evals:
        xs, ys = zip(*evals)
        ax.plot(xs, ys, "o-", color="tab:orange", ms=4, label="greedy evaluation mean")
    if target_return is not None:
        ax.axhline(target_return, ls="--", color="gray", lw=1, label=f"target {target_return:g}")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if episodes or evals:
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    with atomic_file(path, suffix=".png", permissions=_file_mode()) as fh:
        fig.savefig(fh, format="png")
    return True
