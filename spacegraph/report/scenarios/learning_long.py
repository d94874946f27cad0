"""The learning regression suite as a report: each reference run's frames- and time-to-target, or where it stood
when a budget ran out (`spacegraph.reports.learning_long`), and its curve against frames and wall time beside the
published curve.

The full report runs every reference run (MinAtar DQN on both backends and Ape-X, IMPALA on Pong: many hours on
2 cores; the lead spreads the seeds over sessions with ``python -m spacegraph.reports.learning_long --run NAME
--seed N --result PATH`` and draws them with ``--from-json PATH --only learning_long``); ``--quick`` runs DQN on
CartPole with a budget of 4,000 frames and 60 s per run.
"""

from __future__ import annotations

from typing import Any, Callable

from harness.measure.figures import Figure, Panel, Series, Table
from spacegraph.report.registry import Context, Scenario, register

FRAMES_PANEL = "return against env frames"
WALL_PANEL = "return against wall time"
#: The learning diagnostics drawn against frames when a run's points hold them (IMPALA's policy entropy and lag).
DIAGNOSTIC_PANELS = {"policy_entropy": ("policy entropy against env frames", "policy entropy (nats), mean since "
                                                                            "the point before"),
                     "policy_lag": ("policy lag against env frames", "updates between acting and learning, mean")}
#: How many seeds of a run must reach its target (k of n, as the short learning tests' seed criteria).
REQUIRED = {1: 1, 2: 2, 3: 2}


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.1f} min"


def short_commit(commit: str) -> str:
    """The commit's first 12 characters, keeping ``+dirty`` (tracked files differed from it)."""
    return commit[:12] + ("+dirty" if commit.endswith("+dirty") else "")


def outcome_cell(run: dict[str, Any]) -> str:
    """``reached`` or ``not reached (why): stood at R at F frames``, or the failure."""
    if run.get("error"):
        return f"failed: {run['error']}"
    if run["reached"]:
        return "reached"
    last = run["last"]
    where = "no point" if last is None else (f"stood at {last['return_100']} after {last['frames']:,} frames, "
                                             f"{_minutes(last['seconds'])}")
    return f"not reached ({run['stop_reason']}): {where}"


def latest_per_seed(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest record (by its measured date) of each seed: a seed run again (say after a fix) counts once,
    as its last run, whatever the earlier ones reached."""
    latest: dict[Any, dict[str, Any]] = {}
    for r in runs:
        if r["seed"] not in latest or str(r["measured"]["date"]) >= str(latest[r["seed"]]["measured"]["date"]):
            latest[r["seed"]] = r
    return [latest[s] for s in sorted(latest)]


def verdict(runs: list[dict[str, Any]]) -> str:
    """``k of n seeds reached the target`` (each seed's latest record, `latest_per_seed`) and whether that meets
    `REQUIRED` (2 of 3), with the earlier records left out named."""
    counted = latest_per_seed(runs)
    n, k = len(counted), sum(bool(r.get("reached")) for r in counted)
    need = REQUIRED.get(n, (2 * n + 2) // 3)
    out = f"{k} of {n} seeds reached the target ({need} of {n} required: {'met' if k >= need else 'not met'})"
    earlier = len(runs) - n
    return out + (f"; each seed counted by its latest run ({earlier} earlier run{'s' * (earlier > 1)} of a seed "
                  f"left out)" if earlier else "")


def run_label(run: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    """``NAME seed S``, with the commit when another record has the same name and seed."""
    label = f"{run['name']} seed {run['seed']}"
    twins = sum(r["name"] == run["name"] and r["seed"] == run["seed"] for r in runs)
    return f"{label} ({short_commit(str(run['measured']['commit']))[:7]})" if twins > 1 else label


def machine_of(measured: dict[str, Any]) -> str:
    """The processor and CPU count a run records, with its host name (older records: the host name and count)."""
    if measured.get("processor"):
        return f"{measured['processor']}, {measured['cpus']} CPUs (host {measured['machine']})"
    return f"{measured['machine']} ({measured['cpus']} CPUs)"


def measured_when(runs: list[dict[str, Any]]) -> dict[str, str]:
    """``{"commit", "date", "machine"}`` of the runs (each records its own; several are listed), which
    ``--from-json`` shows as the figure's provenance."""
    def joined(get: Callable[[dict[str, Any]], str]) -> str:
        values = sorted({get(r["measured"]) for r in runs})
        return values[0] if len(values) == 1 else f"{len(values)} values: " + ", ".join(values)

    return {"commit": joined(lambda m: str(m["commit"])), "date": joined(lambda m: str(m["date"])),
            "machine": joined(machine_of)}


def return_curves(label: str, points: list[dict[str, Any]], side: str = "ours") -> list[Series]:
    """The two curves of a run's (or a peer's) points: last-100 return against frames and against wall time."""
    pts = [p for p in points if p["return_100"] is not None]
    ys = [p["return_100"] for p in pts]
    return [Series(label, [p["frames"] / 1e6 for p in pts], ys, side=side, panel=FRAMES_PANEL),
            Series(label, [p["seconds"] / 60 for p in pts], ys, side=side, panel=WALL_PANEL)]


def figure_notes(result: dict[str, Any], name: str) -> list[str]:
    """The result's hand-written notes that figure ``name`` draws: those naming it in ``figures``, and bare
    strings (older results: every figure draws them)."""
    return [n if isinstance(n, str) else n["text"] for n in result.get("notes") or []
            if isinstance(n, str) or name in n.get("figures", ())]


def figure(name: str, runs: list[dict[str, Any]], criteria: dict[str, Any], result: dict[str, Any]) -> Figure:
    """One environment's runs: curves against frames and wall time, the target, a table of outcomes."""
    frames = Panel(title=FRAMES_PANEL, x_label="env frames (millions)", y_label="mean return, last 100 episodes")
    wall = Panel(title=WALL_PANEL, x_label="wall time (minutes)", y_label="mean return, last 100 episodes")
    series, rows, names = [], [], sorted({r["name"] for r in runs})
    for r in runs:
        series += return_curves(run_label(r, runs), r.get("points", []))
        stop, m = r["stop"], r["measured"]
        rows.append([r["name"], r["seed"], stop["target_return"], f"{stop['frames']:,}", _minutes(stop["seconds"]),
                     outcome_cell(r), "-" if r.get("frames_to_target") is None else f"{r['frames_to_target']:,}",
                     _minutes(r.get("seconds_to_target")), r.get("best_return_100"),
                     f"{m['date']}, {short_commit(m['commit'])}, {machine_of(m)}"])
    panels = [frames, wall]
    for key, (title, y_label) in DIAGNOSTIC_PANELS.items():
        drawn = [(run_label(r, runs), [p for p in r.get("points", []) if p.get(key) is not None])
                 for r in runs]
        drawn = [(label, pts) for label, pts in drawn if pts]
        if drawn:
            panels.append(Panel(title=title, x_label="env frames (millions)", y_label=y_label))
            series += [Series(label, [p["frames"] / 1e6 for p in pts], [p[key] for p in pts], panel=title)
                       for label, pts in drawn]
    peers = [p for p in result.get("peers", []) if p["figure"] == name]
    for p in peers:
        series += return_curves(p["label"], p["points"], side="peer")
    for n in names:
        if "[" in n and n.split("[", 1)[0] in names:
            continue        # an A/B variant: its reference run draws the same target
        crit = criteria.get(n) or next(r["stop"] for r in runs if r["name"] == n)
        budget = [0, crit["frames"] / 1e6]
        series.append(Series(f"target of {n}", budget, [crit["target_return"]] * 2, side="reference",
                             panel=frames.title))
    table = Table(title="Reference runs: stop criteria and outcome",
                  header=["run", "seed", "target (last-100 mean)", "frame budget", "time budget", "outcome",
                          "frames to target", "time to target", "best last-100 mean", "measured (date, commit, "
                                                                                     "machine)"], rows=rows)
    sources = {n: (criteria.get(n) or {}).get("target_source") or next(
        (r.get("target_source") for r in runs if r["name"] == n), "") for n in names}
    notes = [f"**{n}**: {verdict([r for r in runs if r['name'] == n])}; target: {sources[n]}." for n in names]
    notes += ["Return: the mean of the last 100 training episodes (exploring), as the published MinAtar curves and "
              "RLlib's release tests count it; a point is taken at each evaluation of the run, and the target counts "
              f"once {min(r['stop']['min_episodes'] for r in runs)} episodes have finished. Time: the trainer's wall "
              "time (evaluations included, process start-up not). A run stops at its target (Ctrl-C: it checkpoints), "
              "at its frame budget or at its time budget, whichever comes first.",
              *(f"Peer run: {p['label']}, {p['points'][-1]['return_100']} after {p['points'][-1]['frames']:,} "
                f"frames and {_minutes(p['points'][-1]['seconds'])} (measured {p['measured'].get('date')}, "
                f"{short_commit(str(p['measured'].get('commit', '')))}; record {p['source']})." for p in peers),
              *(f"Note written by hand after the run: {text}" for text in figure_notes(result, name))]
    counted = [r for n in names for r in latest_per_seed([r for r in runs if r["name"] == n])]
    reached, earlier = sum(bool(r.get("reached")) for r in counted), len(runs) - len(counted)
    headline = f"{reached} of {len(counted)} runs reached their target" + (
        f" (each seed's latest run; {earlier} earlier run{'s' * (earlier > 1)} left out)" if earlier else "")
    return Figure(name=name, title=f"Reference learning runs: {name.removeprefix('learning_long_')}",
                  figure_ref="learning regression suite (issue 42)", panels=panels, series=series,
                  tables=[table], notes=notes, raw={**result, **measured_when(runs)},
                  headline=headline)


def figures(result: dict[str, Any]) -> list[Figure]:
    """One figure per environment (``figure`` of the runs), in the order the runs came."""
    order: dict[str, list[dict[str, Any]]] = {}
    for run in result["runs"]:
        order.setdefault(run["figure"], []).append(run)
    return [figure(name, runs, result.get("criteria", {}), result) for name, runs in order.items()]


def run(ctx: Context) -> list[Figure]:
    from spacegraph.reports.learning_long import measure
    from spacegraph.reports.learning_long_runs import quick_runs, reference_runs

    runs = quick_runs() if ctx.quick else reference_runs()
    return figures(measure(runs, seeds=tuple(range(ctx.seeds)), log=ctx.progress.step))


SCENARIO = register(Scenario(name="learning_long", title="Reference learning runs (time and frames to target)",
                             figure_ref="learning regression suite", run=run, render=figures,
                             steps=lambda ctx: ctx.seeds * (2 if ctx.quick else 16)))
