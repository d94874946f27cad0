"""Framework overhead against hand-written code (issue 18): act, update, sampling and start-up, in one run
(`spacegraph.reports.overhead`): every figure the median of the repeats, min-max beside it, against its target.
"""

from __future__ import annotations

import statistics
from typing import Any

from harness.measure.figures import Figure, Panel, Ratio, Series, Table
from spacegraph.report.registry import Context, Scenario, register
from spacegraph.reports.overhead import UPDATE_NETWORKS

#: PyTorch-only sampling rows: the traced act (held to the target) and the act step by step (no target).
EXTRA_SAMPLING = (("traced_act", "acting, `act` traced (`execution.trace: [act]`)", True),
                  ("eager_act", "acting step by step, no replays (`execution.replay: false`)", False))
NOTE = ("Sampling: the worker acting through the framework, not observing, against a hand-written loop doing the same "
        "(the Q-network called directly, epsilon-greedy in NumPy, the same `VectorEnv`); in brackets the worker "
        "observing too (n-step folding and replay insert); in square brackets the worker acting through the loop's own "
        "hand-written act (the most the framework's act could reach). The traced rows: an agent whose `act` runs as a "
        "TorchScript graph (PyTorch only). On PyTorch the first rows' act runs as replays of its recorded calls (the "
        "default, `execution.replay`); the step-by-step rows turn them off (no target). Start-up is wall-clock time "
        "of a fresh process and moves with the machine's load (the framework import alone is most of it). The same "
        "comparisons run in asv as `act.ActThroughput.track_ratio`, `update.DQNUpdate.track_hand_over_framework`, "
        "`sampling.SamplingOverhead.track_act_over_direct` and `startup.TrainStartup.track_first_progress_seconds`.")


def spread(values: list[float]) -> str:
    """The median of ``values`` with their min-max in brackets (one value: the value)."""
    more = f" ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 else ""
    return f"{statistics.median(values):.2f}{more}"


def verdict(values: list[float], target: float, higher_is_better: bool = True) -> str:
    """``spread`` and ``met`` / ``NOT met`` of the median against ``target``."""
    med = statistics.median(values)
    return f"{spread(values)} {'met' if (med >= target if higher_is_better else med <= target) else 'NOT met'}"


def measures(r: dict[str, Any]) -> list[tuple[str, float | None, bool, dict[str, list[float]], str]]:
    """``(measure, target, higher is better, {backend: values}, sampling point)`` rows of a result (the sampling
    point, e.g. ``"pong-4"``, for the rows whose cells also show the worker observing and the hand-written act)."""
    backends, t = list(r["startup"]), r["targets"]
    out: list[tuple[str, float | None, bool, dict[str, list[float]], str]] = []
    for batch in r["act"][backends[0]]:
        out.append((f"act framework/hand, batch {batch}", t["act"], True, {b: r["act"][b][batch] for b in backends},
                    ""))
    for network, label in UPDATE_NETWORKS.items():
        if network in r["update"]:
            out.append((f"update hand/framework, {label}, batch 32", t["update"], True, r["update"][network], ""))
    for point, by_backend in r.get("sampling", {}).items():
        config, n = point.rsplit("-", 1)
        out.append((f"sampling worker/direct loop, {config.capitalize()}, {n} env(s): acting (observing too) "
                    "[hand-written act]", t["sampling"], True, {b: by_backend[b]["act"] for b in backends}, point))
    for key, label, held in EXTRA_SAMPLING:
        for point, by_backend in r.get("sampling", {}).items():
            if any(by_backend[b].get(key) for b in backends):
                config, n = point.rsplit("-", 1)
                out.append((f"sampling worker/direct loop, {config.capitalize()}, {n} env(s): {label}",
                            t["sampling"] if held else None, True, {b: by_backend[b].get(key) or [] for b in backends},
                            ""))
    out.append(("start-up: `spacegraph train dqn_cartpole` to first progress line (s)", t["startup_s"], False,
                r["startup"], ""))
    return out


def table(r: dict[str, Any]) -> Table:
    """The overhead table: one row per measure, a cell per backend (median, min-max, verdict)."""
    backends = list(r["startup"])
    rows = []
    for name, target, higher, values, point in measures(r):
        cells = []
        for b in backends:
            vs = values.get(b) or []
            cell = "-" if not vs else (spread(vs) if target is None else verdict(vs, target, higher))
            if point:
                by = r["sampling"][point][b]
                cell += f" ({statistics.median(by['observing']):.2f})"
                cell += f" [{statistics.median(by['hand_act']):.2f}]" if by.get("hand_act") else ""
            cells.append(cell)
        rows.append([name, "-" if target is None else f"{'>=' if higher else '<='} {target}", *cells])
    if r.get("imports"):
        plain = r.get("imports_plain") or {}
        rows.append(["of which: the framework's import alone in a fresh interpreter, as spacegraph imports it "
                     "(TensorFlow without its eager Keras import; a plain `import tensorflow` in brackets) (s)", "-",
                     *(f"{statistics.median(r['imports'][b]):.2f}"
                       + (f" [{statistics.median(plain[b]):.2f}]" if plain.get(b) else "") for b in backends)])
        if all(len(r["imports"][b]) == len(r["startup"][b]) for b in backends):
            rows.append(["of which: after the import (start-up minus the import alone, per pair taken one right after "
                         "the other) (s)", "-",
                         *(spread([s - i for s, i in zip(r["startup"][b], r["imports"][b])]) for b in backends)])
    return Table(title=f"Median of {r['repeats']} repeats (min-max); interleaved rounds of CPU time, {r['seconds']} s "
                       "per contender", header=["measure", "target", *backends], rows=rows)


def tree(r: dict[str, Any]) -> str:
    """``abc1234`` with what was uncommitted under the measured packages (or that it is unknown)."""
    dirty = r.get("uncommitted", ())
    if dirty is None:
        return f"{r['commit']} (git status unknown)"
    return r["commit"] + (f" with uncommitted changes ({', '.join(line[3:] for line in dirty)})" if dirty else "")


def figures(r: dict[str, Any]) -> list[Figure]:
    """The table, a ratio per (measure, backend) with a target, act against batch and sampling against envs."""
    backends = list(r["startup"])
    ratios, met, held = [], 0, 0
    for name, target, higher, values, _ in measures(r):
        for b in backends:
            if values.get(b) and target is not None:
                ratio = Ratio(f"{name}, {b}", statistics.median(values[b]),
                              target=f"{'>=' if higher else '<='} {target}",
                              note=f"{min(values[b]):.2f}-{max(values[b]):.2f}" if len(values[b]) > 1 else "")
                ratios.append(ratio)
                held, met = held + 1, met + bool(ratio.met)
    act = Panel(title="act framework/hand", x_label="batch", y_label="ratio (median)", x_log=True)
    sampling = Panel(title="sampling worker/direct loop, acting", x_label="environments", y_label="ratio (median)",
                     x_log=True)
    series = [Series(b, [int(n) for n in r["act"][b]], [statistics.median(v) for v in r["act"][b].values()],
                     panel=act.title) for b in backends]
    for config in dict.fromkeys(p.rsplit("-", 1)[0] for p in r.get("sampling", {})):
        points = [(int(p.rsplit("-", 1)[1]), v) for p, v in r["sampling"].items() if p.rsplit("-", 1)[0] == config]
        series += [Series(f"{config}, {b}", [n for n, _ in points],
                          [statistics.median(v[b]["act"]) for _, v in points], panel=sampling.title) for b in backends]
    notes = [f"Code measured: {tree(r)}; CPU only, one framework thread; load average {r['load_before'][0]:.1f} at the "
             f"start, {r['load_after'][0]:.1f} at the end ({r['minutes']:.1f} min).", NOTE, *(r.get("notes") or [])]
    return [Figure(name="overhead", title="Framework overhead against hand-written code", figure_ref="issue 18",
                   panels=[act, sampling], series=series, ratios=ratios, tables=[table(r)], notes=notes, raw=r,
                   headline=f"{met} of {held} act, update, sampling and start-up measures meet their targets")]


def run(ctx: Context) -> list[Figure]:
    from spacegraph.reports.overhead import measure

    ctx.progress.step("act, update, sampling and start-up against hand-written code")
    result = measure(repeats=1 if ctx.quick else 2, seconds=0.5 if ctx.quick else 2.0,
                     sampling_points={"cartpole": (1, 4)} if ctx.quick else None)
    return figures(result)


SCENARIO = register(Scenario(name="overhead", title="Framework overhead", figure_ref="issue 18", run=run,
                             render=figures))
