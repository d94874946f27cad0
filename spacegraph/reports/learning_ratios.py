"""DQN learning against RLlib: ours / RLlib per metric, with what is known about each ratio, against the targets.

An unsolved run counts with what it had spent when it stopped (a lower bound of what solving
would take), so ratios involving one are bounds (``at_most`` / ``at_least``).
"""

from __future__ import annotations

import statistics
from typing import Any

from spacegraph.reports.learning_criterion import OURS

#: The issue's targets: ours / RLlib env steps below 1, ours / RLlib wall time at most 0.5.
TARGETS = {"env_steps": ("<", 1.0), "train_s": ("<=", 0.5), "train_eval_s": ("<=", 0.5)}
METRIC_TITLES = {"env_steps": "env steps", "train_s": "training wall s (no evaluation)",
                 "train_eval_s": "wall s with evaluation"}


def run_value(run: dict[str, Any], metric: str) -> tuple[float, bool] | None:
    """``(value, exact)``: a solved run's value at solving, or an unsolved run's value when it stopped
    (a lower bound of what solving would take); None for a failed run."""
    if "error" in run:
        return None
    if run["solved"]:
        return float({"env_steps": run["solved_at"], "train_s": run["train_s_to_solve"],
                      "train_eval_s": run["train_eval_s_to_solve"]}[metric]), True
    return float({"env_steps": run["env_steps"], "train_s": run["train_s"],
                  "train_eval_s": run["train_s"] + run["eval_s"]}[metric]), False


def ratio(ours: list[tuple[float, bool] | None], rllib: list[tuple[float, bool] | None]) -> dict[str, Any]:
    """Ours / RLlib as the ratio of the sums over runs, with what is known about it.

    An unsolved run's value is a lower bound of its true cost, so an unsolved RLlib run
    makes the ratio an upper bound (``"at_most"``), an unsolved run of ours a lower bound
    (``"at_least"``); both together (or a failed run) leave it undetermined (value None).

    Returns:
        ``{"value": float | None, "kind": "exact" | "at_most" | "at_least" | None}``.
    """
    if not ours or not rllib or any(v is None for v in ours + rllib):
        return {"value": None, "kind": None}
    ours_exact, rllib_exact = all(e for _, e in ours), all(e for _, e in rllib)
    if not ours_exact and not rllib_exact:
        return {"value": None, "kind": None}
    kind = "exact" if ours_exact and rllib_exact else ("at_most" if ours_exact else "at_least")
    return {"value": sum(v for v, _ in ours) / sum(v for v, _ in rllib), "kind": kind}


def median_ratio(ours: list[tuple[float, bool] | None], rllib: list[tuple[float, bool] | None]) -> dict[str, Any]:
    """Ours / RLlib as the ratio of the medians over runs (issue 18 states its wall-time target so), with what is
    known about it: a median of lower bounds is a lower bound of the median, so the kinds are `ratio`'s.

    Returns:
        ``{"value": float | None, "kind": "exact" | "at_most" | "at_least" | None}``.
    """
    summed = ratio(ours, rllib)
    if summed["value"] is None:
        return summed
    return {"value": statistics.median(v for v, _ in ours) / statistics.median(v for v, _ in rllib),
            "kind": summed["kind"]}


def verdict(r: dict[str, Any], metric: str) -> str:
    """``"met"``, ``"missed"`` or ``"undetermined"``: a ratio against the metric's target in `TARGETS`."""
    op, limit = TARGETS[metric]
    value, kind = r["value"], r["kind"]
    if value is None:
        return "undetermined"
    meets = value < limit if op == "<" else value <= limit
    if kind == "exact":
        return "met" if meets else "missed"
    if kind == "at_most":  # the true ratio is at most value
        return "met" if meets else "undetermined"
    return "missed" if not meets else "undetermined"  # at_least: the true ratio is at least value


def compare(result: dict[str, Any]) -> dict[str, Any]:
    """Ours / RLlib per backend and metric: per seed, over all seeds (sums) and of the medians, each with its verdict.

    Returns:
        ``{side: {metric: {"per_seed": {seed: ratio}, "all": ratio, "median": ratio}}}`` for our sides, where each
        ratio is `ratio`'s dict plus ``"verdict"``; empty without RLlib runs.
    """
    runs = [r for r in result["runs"]]
    by = {(r["side"], r["seed"]): r for r in runs}
    seeds = result["config"]["seeds"]
    if "rllib" not in result["config"]["sides"]:
        return {}
    out: dict[str, Any] = {}
    for side in (s for s in OURS if s in result["config"]["sides"]):
        out[side] = {}
        for metric in TARGETS:
            per_seed = {}
            for seed in seeds:
                r = ratio([run_value(by[(side, seed)], metric)], [run_value(by[("rllib", seed)], metric)])
                per_seed[str(seed)] = {**r, "verdict": verdict(r, metric)}
            values = ([run_value(by[(side, s)], metric) for s in seeds], [run_value(by[("rllib", s)], metric)
                                                                         for s in seeds])
            r, m = ratio(*values), median_ratio(*values)
            out[side][metric] = {"per_seed": per_seed, "all": {**r, "verdict": verdict(r, metric)},
                                 "median": {**m, "verdict": verdict(m, metric)}}
    return out


def fmt_ratio(r: dict[str, Any]) -> str:
    """A ratio as text: ``0.42``, ``≤ 0.42``, ``≥ 1.30`` or ``n/a``."""
    if r["value"] is None:
        return "n/a"
    return {"exact": "", "at_most": "≤ ", "at_least": "≥ "}[r["kind"]] + f"{r['value']:.2f}"
