"""DQN learning curves on CartPole-v1 against env steps and wall-clock: ours (TF, PyTorch) and RLlib's tuned
DQN, each run in a fresh one-thread subprocess, interleaved by seed (`spacegraph.reports.learning_runs`);
the mean and a 95% interval over seeds at every evaluation.

The report runs each side within a bounded budget (env steps and seconds per run); the standalone
``spacegraph.reports.learning_peers`` report measures the time to solve without that bound.
"""

from __future__ import annotations

from typing import Any

from harness.measure.figures import Figure, Panel, Ratio, Series, Table, mean_ci95
from spacegraph.report.registry import Context, Scenario, register

TITLES = {"ours_tf": "ours, TF", "ours_torch": "ours, PyTorch", "rllib": "RLlib DQN"}
SIDES = ("ours_tf", "ours_torch", "rllib")


def curve_points(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per evaluation index: mean env steps and train seconds, and mean / 95% interval of the greedy return
    over the runs that reached it (``n`` of them)."""
    runs = [r for r in runs if "error" not in r and r.get("curve")]
    out = []
    for k in range(max((len(r["curve"]) for r in runs), default=0)):
        pts = [r["curve"][k] for r in runs if len(r["curve"]) > k]
        mean, lo, hi = mean_ci95([p["screen_mean"] for p in pts])
        out.append({"env_steps": mean_ci95([p["env_steps"] for p in pts])[0],
                    "train_s": mean_ci95([p["train_s"] for p in pts])[0], "mean": mean, "lo": lo, "hi": hi,
                    "n": len(pts)})
    return out


def figures(result: dict[str, Any]) -> list[Figure]:
    """Return against env steps and against training seconds per side (mean, 95% band), runs, ratios."""
    from spacegraph.reports.learning_ratios import METRIC_TITLES, TARGETS

    steps = Panel(title="greedy return against env steps", x_label="env steps", y_label="mean return")
    wall = Panel(title="greedy return against training wall-clock", x_label="training seconds",
                 y_label="mean return")
    series = []
    for side in result["config"]["sides"]:
        pts = curve_points([r for r in result["runs"] if r["side"] == side])
        kind = "peer" if side == "rllib" else "ours"
        for panel, x in ((steps, "env_steps"), (wall, "train_s")):
            series.append(Series(TITLES[side], [p[x] for p in pts], [p["mean"] for p in pts],
                                 lo=[p["lo"] for p in pts], hi=[p["hi"] for p in pts], side=kind, panel=panel.title))
    ratios = []
    for side, metrics in result["comparison"].items():
        for metric, entry in metrics.items():
            r = entry["all"]
            op, limit = TARGETS[metric]
            ratios.append(Ratio(f"DQN CartPole {METRIC_TITLES[metric]}: {TITLES[side]} / RLlib", r["value"],
                                target=f"{op} {limit}", verdict=entry["all"]["verdict"],
                                note={"exact": "", "at_most": "at most", "at_least": "at least"}.get(r["kind"] or "",
                                                                                                       ""),
                                ours="sum over seeds", peer="sum over seeds"))
    rows = []
    for r in result["runs"]:
        if "error" in r:
            rows.append([TITLES[r["side"]], r["seed"], "failed: " + r["error"], None, None, None, None])
            continue
        last = r["curve"][-1]["screen_mean"] if r["curve"] else None
        rows.append([TITLES[r["side"]], r["seed"], "solved" if r["solved"] else f"not solved ({r['stop_reason']})",
                     r["solved_at"] if r["solved"] else r["env_steps"], r["train_s"], r["eval_s"], last])
    crit, budget = result["config"]["criterion"], result["config"]["budget"]
    table = Table(title="Runs (interleaved by seed; each a fresh one-thread subprocess)",
                  header=["side", "seed", "outcome", "env steps (at solving or stop)", "training s", "evaluation s",
                          "last greedy return"], rows=rows)
    notes = [f"Solved: greedy mean return >= {crit['min_return']} over {crit['eval_episodes']} episodes (screened "
             f"on the first {crit['screen_episodes']}), evaluated every {crit['eval_every']} env steps; curves show "
             "the screening mean (played at every evaluation).",
             f"Budget per run: {budget['env_steps']:,} env steps or {budget['seconds']:g} s of training and "
             "evaluation, whichever comes first: a ratio of unsolved runs is a bound ('at most' / 'at least') or "
             "undetermined.",
             "Band: 95% Student-t interval of the mean over the seeds that reached that evaluation.",
             f"RLlib: {result['rllib_note'] or 'measured in the same run'}."]
    return [Figure(name="learning", title="DQN learning curves on CartPole-v1", figure_ref="RLgraph Fig. 7b (CartPole)",
                   panels=[steps, wall], series=series, ratios=ratios, tables=[table], notes=notes,
                   peer_missing=result["rllib_note"], raw=result)]


def budgets(quick: bool) -> tuple[Any, Any]:
    """``(Criterion, Budget)`` of the quick or the full report."""
    from spacegraph.reports.learning_criterion import Budget, Criterion

    if quick:
        return (Criterion(eval_every=1000, eval_episodes=10, screen_episodes=3),
                Budget(env_steps=2000, seconds=45.0, grace_seconds=120.0))
    return (Criterion(eval_every=2500, eval_episodes=20, screen_episodes=5),
            Budget(env_steps=50_000, seconds=110.0, grace_seconds=180.0))


def run(ctx: Context) -> list[Figure]:
    from spacegraph.reports.learning_runs import measure

    criterion, budget = budgets(ctx.quick)
    sides = SIDES if ctx.peers else SIDES[:2]
    result = measure(seeds=tuple(range(ctx.seeds)), sides=sides, criterion=criterion, budget=budget,
                     log=lambda line: ctx.progress.step(line))
    if not ctx.peers:
        result["rllib_note"] = "peers not requested (--no-peers)"
    return figures(result)


SCENARIO = register(Scenario(name="learning", title="DQN learning curves", figure_ref="RLgraph Fig. 7b", run=run,
                             steps=lambda ctx: ctx.seeds * (len(SIDES) if ctx.peers else 2),
                             render=figures))
