"""IMPALA learning on Pong: ours against RLlib's IMPALA, each trained for the same wall time on this machine, one
after the other (`spacegraph.reports.impala_learning`): the mean return of the last 100 training episodes
against env frames and wall time.
"""

from __future__ import annotations

from typing import Any

from harness.measure.figures import Figure, Panel, Series, Table
from spacegraph.report.registry import Context, Scenario, register
from spacegraph.reports.impala_learning import at

#: Times (minutes) the table reads the curves at; those past the run's length are left out.
TABLE_MINUTES = (1, 2, 5, 10, 15, 20, 30, 40, 60, 90, 120)
RANDOM_POLICY = -20.7
NAMES = {"ours": "ours", "rllib": "RLlib IMPALA"}


def _cell(point: dict[str, Any] | None) -> str:
    if point is None or point["mean_return_100"] is None:
        return "-"
    return f"{point['mean_return_100']:.1f} ({point['frames'] / 1e6:.2f}M)"


def tables(result: dict[str, Any]) -> list[Table]:
    """The curves read at `TABLE_MINUTES` ("stopped" past a failed side's last point) and a summary per side."""
    minutes = [m for m in TABLE_MINUTES if m <= result["minutes"]] or [result["minutes"]]
    curve_rows, summary = [], []
    for side in ("ours", "rllib"):
        data = result["sides"].get(side, {})
        points = data.get("points", [])
        measured = data.get("measured", {"date": result["date"], "commit": result["commit"]})
        when = f"{measured['date']}, {measured['commit']}"
        if not points:
            curve_rows.append([f"{NAMES[side]}: return (frames)", f"({data.get('error', 'not run')})",
                               *[""] * (len(minutes) - 1)])
            summary.append([NAMES[side], None, None, None, None, None, when, data.get("error", "not run")])
            continue
        end = points[-1]["seconds"] + result.get("every_s", 0.0)  # a failed side stopped after its last point
        curve_rows.append([f"{NAMES[side]}: return (frames)",
                           *("stopped" if m * 60 > end else _cell(at(points, m * 60)) for m in minutes)])
        last = points[-1]
        best = max((p["mean_return_100"] for p in points if p["mean_return_100"] is not None), default=None)
        cpu = sum(p["cpu_utilisation"] for p in points) / len(points)
        summary.append([NAMES[side], last["frames"], last["frames"] / max(last["seconds"], 1e-9), last["episodes"],
                        best, f"{cpu:.0%}", when, data.get("error", "")])
    return [Table(title="Mean return of the last 100 episodes (env frames) at each minute",
                  header=["minutes", *(str(m) for m in minutes)], rows=curve_rows),
            Table(title="Each side", header=["side", "env frames", "frames/s", "episodes", "best return (100 ep.)",
                                             "machine CPU", "measured", "error"], rows=summary)]


def headline(result: dict[str, Any]) -> str:
    """Both sides' return at the end of the shorter run."""
    ends = {side: data["points"] for side, data in result["sides"].items() if data.get("points")}
    if not ends:
        return "no side measured"
    t = min(points[-1]["seconds"] for points in ends.values())
    parts = []
    for side, points in ends.items():
        p = at(points, t)
        ret = p["mean_return_100"] if p else None
        parts.append(f"{NAMES[side]} {'-' if ret is None else f'{ret:.1f}'}")
    return (f"Pong, {result['actors']} actors, mean return of the last 100 episodes after {t / 60:.0f} min: "
            + ", ".join(parts) + f" (random policy {RANDOM_POLICY})")


def figures(result: dict[str, Any]) -> list[Figure]:
    """Return against env frames and against wall time, both sides, with the random policy's return."""
    frames = Panel(title="return against env frames", x_label="env frames (millions)",
                   y_label="mean return, last 100 episodes")
    wall = Panel(title="return against wall time", x_label="wall time (minutes)",
                 y_label="mean return, last 100 episodes")
    series = []
    for side in ("ours", "rllib"):
        points = [p for p in result["sides"].get(side, {}).get("points", []) if p["mean_return_100"] is not None]
        if points:
            label = f"ours ({result['executor']})" if side == "ours" else NAMES[side]
            kind = "ours" if side == "ours" else "peer"
            series += [Series(label, [p["frames"] / 1e6 for p in points], [p["mean_return_100"] for p in points],
                              side=kind, panel=frames.title),
                       Series(label, [p["seconds"] / 60 for p in points], [p["mean_return_100"] for p in points],
                              side=kind, panel=wall.title)]
    if series:
        for panel in (frames, wall):
            xs = [x for s in series if s.panel == panel.title for x in s.x]
            series.append(Series("random policy (Mnih et al. 2015)", [min(xs), max(xs)], [RANDOM_POLICY] * 2,
                                 side="reference", panel=panel.title))
    notes = [f"One learner and {result['actors']} actors each, the two runs one after the other for the same wall time "
             f"({result['minutes']:g} minutes, start-up included); ours on {result['executor']} (`impala_pong.yaml`, "
             "learner on PyTorch). Return: the mean of the last 100 training episodes (for RLlib, the returns its env "
             "runners report at each episode's end through an `on_episode_end` callback); env frames count the 4 "
             "skipped frames of each step.",
             "Published, other hardware: the RLgraph paper's Fig. 9 compares IMPALA throughput on DM Lab, not a Pong "
             "learning curve; the IMPALA paper's 250,000 frames/s ran on up to thousands of machines. Neither is "
             "comparable with a 2-core run.", *result.get("notes", [])]
    rllib = result["sides"].get("rllib", {})
    missing = None if rllib.get("points") or not rllib else f"RLlib's IMPALA: {rllib.get('error', 'no point')}"
    return [Figure(name="impala_learning", title=f"IMPALA on Pong: ours against RLlib's IMPALA, "
                                                 f"{result['minutes']:g} minutes each",
                   figure_ref="IMPALA learning (Pong)", panels=[frames, wall], series=series, tables=tables(result),
                   notes=notes, peer_missing=missing, raw=result, headline=headline(result))]


def run(ctx: Context) -> list[Figure]:
    from spacegraph.reports.impala_learning import measure

    result = measure(minutes=2.0 if ctx.quick else 120.0, actors=2, every=15.0,
                     sides=("ours", "rllib") if ctx.peers else ("ours",), log=ctx.progress.step)
    return figures(result)


SCENARIO = register(Scenario(name="impala_learning", title="IMPALA learning on Pong", figure_ref="IMPALA (Pong)",
                             run=run, steps=lambda ctx: 2 if ctx.peers else 1, render=figures))
