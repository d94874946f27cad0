"""IMPALA throughput (RLgraph Fig. 9 on one machine): env frames/s learned from with 1, 2, 4 actors, ours on
distributed TF and on Ray, each with PyTorch and with TensorFlow compute, beside RLlib's IMPALA and raw stepping,
and CartPole's return against wall time (`spacegraph.reports.impala_throughput`, every side in a fresh process,
one after the other).
"""

from __future__ import annotations

from typing import Any

from harness.measure.figures import Figure, Panel, Ratio, Series, Table
from spacegraph.report.registry import Context, Scenario, register
from spacegraph.reports.impala_throughput import CURVE_POINTS, at

#: Ours on each executor, PyTorch compute (the labels of the runs measured before TF compute, which the committed
#: runs keep) and TF compute, and RLlib's.
SIDES = {"ours": "ours, distributed TF", "ours_tf": "ours, distributed TF, TF compute", "ours_ray": "ours, Ray",
         "ours_ray_tf": "ours, Ray, TF compute", "rllib": "RLlib IMPALA"}
#: The sides' names in the load and start-up columns.
SHORT = {"ours": "ours TF", "ours_tf": "TF-dist TF compute", "ours_ray": "Ray", "ours_ray_tf": "Ray TF compute",
         "rllib": "RLlib"}
#: (executor, PyTorch side, TF side) of the TF / PyTorch compute column.
COMPUTE_PAIRS = (("tf-dist", "ours", "ours_tf"), ("Ray", "ours_ray", "ours_ray_tf"))
TARGET = 2.0
CURVE = "CartPole: mean return of the last 100 episodes against wall time"


def _rate(r: dict[str, Any]) -> float | None:
    return r.get("frames_per_s")


def figures(result: dict[str, Any]) -> list[Figure]:
    """Frames/s against actors per env, the curves, the table, and ours / RLlib per env and actor count."""
    actors = result["actors"]
    panels, series, ratios, rows = [], [], [], []
    columns = [side for side in SIDES if side == "rllib" or any(
        f"{side}-{n}" in sides for sides in result["envs"].values() for n in actors)]
    startup = any("startup_s" in r for sides in result["envs"].values() for r in sides.values())
    for env, sides in result["envs"].items():
        panel = Panel(title=f"{env}: env frames/s learned from", x_label="actors", y_label="env frames/s",
                      x_log=True, y_log=True)
        panels.append(panel)
        for side, label in SIDES.items():
            pts = [(n, _rate(sides.get(f"{side}-{n}", {}))) for n in actors]
            if any(v is not None for _, v in pts):
                series.append(Series(label, [n for n, _ in pts], [v for _, v in pts],
                                     side="peer" if side == "rllib" else "ours", panel=panel.title))
        raw = sides.get("raw", {})
        if _rate(raw) is not None:
            series.append(Series("raw stepping, 1 process", [1], [_rate(raw)], side="reference", panel=panel.title))
        for n in actors:
            got = {side: sides.get(f"{side}-{n}", {}) for side in columns}
            for side in columns[:-1]:
                ours, rllib = _rate(got[side]), _rate(got["rllib"])
                if ours is not None and rllib:
                    ratios.append(Ratio(f"IMPALA {env} {n} actors: {SIDES[side]} / RLlib", ours / rllib,
                                        ours=f"{ours:,.0f} frames/s", peer=f"{rllib:,.0f} frames/s",
                                        target=f">= {TARGET:g}"))
            rows.append([env, n, *(_rate(r) if _rate(r) is not None else f"({r.get('error', 'not run')})"
                                   for r in got.values()),
                         *([compute_ratios(got)] if "ours_tf" in columns or "ours_ray_tf" in columns else []),
                         *([" / ".join(f"{r['startup_s']:.0f}" if "startup_s" in r else "-"
                                       for side, r in got.items() if side != "rllib")] if startup else []),
                         " / ".join(f"{r['cpu_utilisation']:.0%}" if "cpu_utilisation" in r else "-"
                                    for r in got.values()),
                         " / ".join(f"{r['load_1min']:.1f}" if "load_1min" in r else "-"
                                    for r in (*got.values(), raw))])
    order = " / ".join([*(SHORT[side] for side in columns), "raw"])
    ours_order = " / ".join(SHORT[side] for side in columns if side != "rllib")
    compute = [f"TF / PyTorch compute ({', '.join(e for e, a, b in COMPUTE_PAIRS if b in columns)})"] \
        if "ours_tf" in columns or "ours_ray_tf" in columns else []
    tables = [Table(title=f"{result['seconds']:g} s windows after warm-up, each side in its own process, one after "
                          "the other", header=["env", "actors", *(f"{SIDES[side]} frames/s" for side in columns),
                                               *compute, *([f"start-up s ({ours_order})"] if startup else []),
                                               "CPU (the machine)", f"1-min load ({order})"],
                    rows=rows)]
    curves = result.get("curves") or {}
    if curves:
        panels.append(Panel(title=CURVE, x_label="seconds from start (start-up included)", y_label="mean return"))
        cells = []
        for side, label in (("curve_ours", SIDES["ours"]), ("curve_rllib", "RLlib IMPALA")):
            curve = curves.get(side, {}).get("curve")
            if curve is None:
                cells.append([label, f"({curves.get(side, {}).get('error', 'not run')})"])
                continue
            series.append(Series(label, [p[0] for p in curve], [p[1] for p in curve],
                                 side="peer" if side == "curve_rllib" else "ours", panel=CURVE))
            cells.append([label, *(at(curve, t) for t in CURVE_POINTS)])
        tables.append(Table(title=f"CartPole, {result.get('curve_actors', 2)} actors: mean return of the last 100 "
                                  "training episodes at each time (None: no episode finished yet)",
                            header=["side", *(f"{t} s" for t in CURVE_POINTS)], rows=cells))
        ours, rllib = (curves.get(s, {}).get("curve") for s in ("curve_ours", "curve_rllib"))
        for t in CURVE_POINTS:
            a, b = (at(ours, t) if ours else None), (at(rllib, t) if rllib else None)
            if a is not None and b:
                ratios.append(Ratio(f"IMPALA CartPole return at {t} s: ours / RLlib", a / b, ours=f"{a:.1f}",
                                    peer=f"{b:.1f}", target="> 1"))
    notes = ["Env frames/s are frames of rollouts the learner learned from (learning on); raw is one process stepping "
             "the same environment vector with random actions. CPU: the whole machine's utilisation over the window. "
             "On 2 cores more than 2 actor processes share the cores with the learner: what the frameworks make of a "
             "fixed machine, not scaling.",
             f"Targets (issue 15): at least {TARGET:g}x RLlib's frames/s; a higher CartPole return than RLlib's at "
             "every point of the curve.", *result.get("notes", [])]
    failed = [r.get("error", "no rate") for s in result["envs"].values() for n in actors
              for r in [s.get(f"rllib-{n}")] if r is not None and "frames_per_s" not in r]
    missing = f"RLlib's IMPALA failed: {failed[0]}" if failed else None  # not run at all: the runner says why
    title = "IMPALA throughput: ours on distributed TF and on Ray (PyTorch and TF compute) against RLlib's IMPALA"
    return [Figure(name="impala", title=title,
                   figure_ref="RLgraph Fig. 9 (one machine)", panels=panels, series=series, ratios=ratios,
                   tables=tables, notes=notes, peer_missing=missing, raw=result, headline=headline(ratios))]


def compute_ratios(got: dict[str, dict[str, Any]]) -> str:
    """TF compute's frames/s over PyTorch's on each executor that measured TF (``-`` where a side has no rate)."""
    cells = []
    for _, torch_side, tf_side in COMPUTE_PAIRS:
        if tf_side in got:
            torch_rate, tf_rate = _rate(got.get(torch_side, {})), _rate(got[tf_side])
            cells.append(f"{tf_rate / torch_rate:.2f}x" if tf_rate is not None and torch_rate else "-")
    return " / ".join(cells)


def headline(ratios: list[Ratio]) -> str:
    """The lowest ours / RLlib frames/s ratio against its target, and the curve points above RLlib's."""
    rates = [r for r in ratios if "frames" in r.ours]
    curve = [r for r in ratios if "return at" in r.name]
    if not rates:
        return "RLlib not measured: no ratio to its IMPALA"
    low = min(rates, key=lambda r: r.value or 0.0)
    text = (f"ours / RLlib IMPALA frames/s: lowest {low.value:.2f}x ({low.name.split(': ')[0]}, "
            f"{low.name.split(': ')[1].split(' / ')[0]}; target >= {TARGET:g}x: "
            f"{'met' if all(r.met for r in rates) else 'missed'})")
    if curve:
        text += f"; CartPole return above RLlib's at {sum(bool(r.met) for r in curve)} of {len(curve)} curve points"
    return text


def run(ctx: Context) -> list[Figure]:
    from spacegraph.reports.impala_throughput import OURS, measure

    sides = ["raw", *OURS, *(["rllib"] if ctx.peers else [])]
    result = measure(envs=["cartpole"] if ctx.quick else ["cartpole", "pong"],
                     actors=[1, 2] if ctx.quick else [1, 2, 4], seconds=5.0 if ctx.quick else 15.0, sides=sides,
                     curve=not ctx.quick, log=ctx.progress.step)
    return figures(result)


def steps(ctx: Context) -> int:
    envs, actors = (1, 2) if ctx.quick else (2, 3)
    return envs * (1 + actors * (5 if ctx.peers else 4)) + (0 if ctx.quick else 1)


SCENARIO = register(Scenario(name="impala", title="IMPALA throughput", figure_ref="RLgraph Fig. 9", run=run,
                             steps=steps, render=figures))
